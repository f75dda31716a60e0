"""`modtrans sweep`: the fastest layouts of a model on a cluster. Every layout Megatron-LM accepts
on N GPUs within a search space, those over the device's memory dropped, the rest estimated (the
fast tier, modtrans.estimate), the best simulated on ASTRA-sim 2.x, ranked in one table.

space.py      the search space, its values as lists or ranges, the enumeration by the rules
fit.py        the memory filter (strategy/llm/footprint.py's memory per stage), why each was dropped
engines.py    where tasks run: this process, a local process pool, or a Dask cluster
cache.py      results kept by the digest of what made them (SQLite), to resume and repeat
finalists.py  the best K translated to traces and simulated on ASTRA-sim 2.x
run.py        the sweep from end to end: enumerate, fit, estimate, simulate, rank
rows.py       the table's rows, their ranking and Pareto front, CSV and JSON written atomically
draw.py       the picture: throughput against memory or GPUs, the front and the finalists marked
request.py    modtrans.sweep(...): the option table's rules, the sweep run, its files written

The package's name is shadowed in `modtrans` by the function `modtrans.sweep` (request.sweep):
import its modules as `from modtrans.sweep import space`.
"""
