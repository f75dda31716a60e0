"""Chakra execution traces, the input of ASTRA-sim 2.x.

schema.py    Chakra's et_def.proto messages, declared on protobuf (no Chakra package needed)
write.py     Plan -> one trace per rank and the communicator-group file
encode.py    a program's nodes as wire bytes, once: the template its ranks share
wire.py      nodes as protobuf wire bytes, written directly: the writer's inner loop
patch.py     a program's nodes encoded once, each of its ranks' traces patched from them
fuse.py      a plan with each chain of computes one node: the same simulated time, fewer nodes
ahead.py     worker processes checking and writing a big set's programs, each its own
read.py      trace files -> nodes (positioned failures for files that are not traces)
ranks.py     trace files -> what the checks across ranks read, a rank at a time, each distinct
             node decoded once
validate.py  trace-set checks across ranks (modtrans validate run.*.et)
summary.py   per-rank totals of a set (modtrans inspect PREFIX)
programs.py  a set read back as one program per pipeline stage (inspect PREFIX --timeline)
"""

from modtrans.chakra.write import ChakraError, checked, files, group_file, groups_json, write

__all__ = ["ChakraError", "checked", "files", "group_file", "groups_json", "write"]
