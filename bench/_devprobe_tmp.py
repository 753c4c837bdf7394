import sys, os, time, timeit
sys.path.insert(0, '.')
from pathlib import Path
from bench.log_parse import generate
from collectors.sglang_log_cli import main_parse_log, record_json
from collectors.sglang_log_stream import parse_stream
from collectors.sglang_log_parse import PREFILTER_B, parse_record, _HEAD, _prefix_before, LogRecord
from collectors.sglang_log_fields import parse_fields_json
p = Path('/tmp/b300k.log'); generate(p, 300000)
def best(f, k=3):
    b = 9e9
    for _ in range(k):
        t = time.process_time(); f(); b = min(b, time.process_time() - t)
    return b
dn = open(os.devnull, 'w')
def iter_only():
    for line in open(p, 'rb'): pass
def prefilter():
    s = PREFILTER_B.search
    for line in open(p, 'rb'):
        if s(line): pass
def stream():
    for r in parse_stream(open(p, 'rb')): pass
def full(): main_parse_log(str(p), True, out=dn, err=dn)
for f in (iter_only, prefilter, stream, full):
    t = best(f); print(f"{f.__name__:<12} {t:.3f}s {300000/t:,.0f} lines/s")
line = "[2026-04-08 14:05:21] Decode batch, #running-req: 33, #token: 9912, token usage: 0.41, cuda graph: True, gen throughput (token/s): 1234.56, #queue-req: 2"
r = parse_record(line, 1)
for stmt in ["parse_record(line, 1)", "_HEAD.search(line)", "parse_fields_json(line, 36)", "_prefix_before('[2026-04-08 14:05:21] ')", "LogRecord(1,'decode',None,{},{},None,None,None)", "record_json(r)", "line.encode().decode()", "PREFILTER_B.search(line.encode())", "b'batch' in line.encode()"]:
    n = 200000
    print(f"{stmt:<50} {timeit.timeit(stmt, number=n, globals=globals())/n*1e6:.2f} us")
