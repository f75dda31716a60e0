"""Which distributed engine a sweep runs on (modtrans/sweep/engines.py): Dask's or Ray's local
cluster of two workers against a local process pool, on this machine, measured in one run.

Run by hand: `python bench/bench_engines.py` in an environment with `distributed` and `ray`
installed (neither is a dependency of modtrans). For each: the start-up (until a first task has
run), a worker's warm-up (importing modtrans's memory model), the overhead of one tiny task (200
of them, mapped at once) and the shut-down. An engine that fails to start says so.

Latest (2026-12-06, 7f72045, the project's 2-core machine; Python 3.11, distributed 2026.8.0,
ray 2.60.0):
    pool: start 0.05 s, warm-up 2.23 s, per task 0.51 ms, shutdown 0.00 s
    dask: start 6.20 s, warm-up 2.02 s, per task 19.30 ms, shutdown 2.38 s
    ray:  failed: "The current node timed out during startup" (its raylet did not register)
"""

from __future__ import annotations

import time
from collections.abc import Callable


def tiny(x: int) -> int:
    return x + 1


def warm(x: int) -> int:
    import modtrans.strategy.llm.footprint  # noqa: F401

    return x


def pool(n: int) -> tuple[float, float, float, float]:
    from concurrent.futures import ProcessPoolExecutor

    t = time.perf_counter()
    ex = ProcessPoolExecutor(2)
    list(ex.map(tiny, range(2)))
    start = time.perf_counter() - t
    t = time.perf_counter()
    list(ex.map(warm, range(2)))
    w = time.perf_counter() - t
    t = time.perf_counter()
    list(ex.map(tiny, range(n)))
    per = (time.perf_counter() - t) / n
    t = time.perf_counter()
    ex.shutdown()
    return start, w, per, time.perf_counter() - t


def dask(n: int) -> tuple[float, float, float, float]:
    from distributed import Client, LocalCluster

    t = time.perf_counter()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    client.gather(client.map(tiny, range(2)))
    start = time.perf_counter() - t
    t = time.perf_counter()
    client.gather(client.map(warm, range(2)))
    w = time.perf_counter() - t
    t = time.perf_counter()
    client.gather(client.map(tiny, range(n)))
    per = (time.perf_counter() - t) / n
    t = time.perf_counter()
    client.close()
    cluster.close()
    return start, w, per, time.perf_counter() - t


def ray(n: int) -> tuple[float, float, float, float]:
    import ray as the_ray

    t = time.perf_counter()
    the_ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    f, g = the_ray.remote(tiny), the_ray.remote(warm)
    the_ray.get([f.remote(0) for _ in range(2)])
    start = time.perf_counter() - t
    t = time.perf_counter()
    the_ray.get([g.remote(i) for i in range(2)])
    w = time.perf_counter() - t
    t = time.perf_counter()
    the_ray.get([f.remote(i) for i in range(n)])
    per = (time.perf_counter() - t) / n
    t = time.perf_counter()
    the_ray.shutdown()
    return start, w, per, time.perf_counter() - t


def main() -> None:
    engines: dict[str, Callable[[int], tuple[float, float, float, float]]] = {
        "pool": pool,
        "dask": dask,
        "ray": ray,
    }
    for name, measure in engines.items():
        try:
            s, w, p, stop = measure(200)
        except Exception as error:  # an engine that does not start here is the finding
            print(f"{name}: failed: {type(error).__name__}: {str(error)[:200]}", flush=True)
            continue
        print(f"{name}: start {s:.2f} s, warm-up {w:.2f} s, per task {p * 1e3:.2f} ms, shutdown {stop:.2f} s")


if __name__ == "__main__":
    main()
