"""The workload text format: model, reader, writer, checks."""
