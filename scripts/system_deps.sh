#!/usr/bin/env bash
# Debian packages Pitwall's tests need: chromium (headless browser tests through Playwright) and
# prometheus-alertmanager (the alert delivery tests run a real Alertmanager on loopback) and
# prometheus (the fleet tests read a server through a real Prometheus server on loopback) and
# postgresql (storage and fleet tests run a real server in a temporary folder).
# Installs them when missing and running as root; otherwise says what to install. The browser
# tests skip, with the reason, when chromium (or the Alertmanager binary) is absent.
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v pdftoppm >/dev/null 2>&1 || missing+=(poppler-utils)
command -v prometheus-alertmanager >/dev/null 2>&1 || missing+=(prometheus-alertmanager)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" fonts-dejavu-core >/dev/null
else
  echo "NOTE: install these Debian packages for the browser tests: ${missing[*]} (sudo apt-get install ${missing[*]})" >&2
fi
