"""Request traces: import (formats, model, summary, importer) and, from there, replay."""
