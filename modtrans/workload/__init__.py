"""The workload text format: model, reader, writer, checks.

model.py       the workload as frozen dataclasses (no parser, no I/O)
vocabulary.py  the header keys and the layer columns, one table each
parse.py       text -> ParseResult (the only importer of lark)
numbers.py     what each consumer makes of a numeric token
write.py       lossless and canonical writers
dialects.py    which consumer a file was written for, and what each does with a layer
checks.py      semantic and dialect checks, registered by code
validate.py    parse + checks, diagnostics sorted
quick.py       the quick check of written text: its form, and the checks on the workload it came from
jsonform.py    Workload <-> JSON (schemas/workload.schema.json)
load.py        path -> parsed workload (text or JSON), never raising
traffic.py     what a file moves: count and bytes per (collective type, group)
summary.py     a file's contents at a glance (modtrans inspect FILE.txt)
"""
