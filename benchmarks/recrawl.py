"""Issue 4's benchmark: validator lookup and record per page, in memory and against the store,
with raw py-lmdb doing the same get and put as the floor."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import lmdb
import msgpack

from crawlstore import InMemValidators, Seed, Store, Validator

from .harness import Result, measure

BATCH = 1000


def bench_validators(n: int) -> list[Result]:
    seeds = [Seed.get(f"https://site{i % 50}.example/item/{i}") for i in range(n)]
    fps = [s.fingerprint for s in seeds]
    validator = Validator('"a-fairly-typical-etag-value"', "Mon, 01 Jan 2024 00:00:00 GMT")
    tmp = Path(tempfile.mkdtemp(prefix="crawlstore-bench-"))
    results = []
    try:
        memory = InMemValidators()

        def in_memory() -> None:
            for fp in fps:
                memory.get(fp)
                memory.put(fp, validator)

        results.append(measure("validators: lookup + record a page", "InMemValidators (dict)", n,
                               in_memory))  # fmt: skip
        for mode in ("safe", "nosync"):
            env = lmdb.open(str(tmp / f"raw-{mode}.lmdb"), subdir=False, map_size=2**34,
                            sync=mode == "safe", metasync=False, lib_version=0)  # fmt: skip

            def raw(env: lmdb.Environment = env, grouped: bool = False) -> None:
                step = BATCH if grouped else 1
                for i in range(0, n, step):
                    with env.begin(write=True) as txn:
                        for fp in fps[i : i + step]:
                            txn.get(fp)
                            txn.put(fp, msgpack.packb([validator.etag, validator.last_modified, 0]))

            store = Store.open(tmp / f"store-{mode}.lmdb", durability=mode)
            validators = store.validators()

            def stored(grouped: bool = False, validators=validators, store=store) -> None:  # type: ignore[no-untyped-def]
                step = BATCH if grouped else 1
                for i in range(0, n, step):
                    with store.transaction():
                        for fp in fps[i : i + step]:
                            validators.get(fp)
                            validators.put(fp, validator)

            ops = n if mode == "nosync" else min(n, 2000)
            group = f"validators: lookup + record, 1 page a commit, {mode}"
            results.append(measure(group, "raw py-lmdb get + put (floor)", ops, lambda: raw(),
                                   repeat=2))  # fmt: skip
            results.append(measure(group, "store.validators() get + put", ops, lambda: stored(),
                                   repeat=2))  # fmt: skip
            group = f"validators: lookup + record, {BATCH} pages a commit, {mode}"
            results.append(measure(group, "raw py-lmdb get + put (floor)", n,
                                   lambda: raw(grouped=True), repeat=2))  # fmt: skip
            results.append(measure(group, "store.validators() get + put", n,
                                   lambda: stored(grouped=True), repeat=2))  # fmt: skip
            store.close()
            env.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results
