"""Tool calls: recovery of calls written as text, argument repair, and the stream processor.

`recovery.py` finds calls in a whole reply with the format families of `formats/` (one module
each, behind the registry in `formats/__init__.py`), `stream.py` does the same on a stream
without delaying text, `arguments.py` repairs every call's arguments. The families share
`scan.py` (string scans), `values.py` (calls from parsed values, typed parameters),
`pythonic.py` (calls written as Python) and `spans.py` (what a finder returns, and what a
family is).
"""
