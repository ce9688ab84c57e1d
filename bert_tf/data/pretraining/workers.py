"""Worker processes for create_pretraining_data: `ordered_map` runs a function over items in a
pool (forked, with per-process state) and yields the results in order, with bounded memory.
"""
import collections
import multiprocessing

# Per-process state set by _init_worker (the tokenizer, options, ...): what the functions
# `ordered_map` runs read.
worker_state = {}


def _init_worker(state):
    worker_state.clear()
    worker_state.update(state)


def ordered_map(function, items, processes, state, max_in_flight=None):
    """Yields function(item) in order, from `processes` worker processes (in-process if <= 1).

    At most `max_in_flight` items (default 2 per process) are submitted and not yet consumed,
    so memory stays bounded however many items `items` yields. `state` (a dict) is available to
    `function` as `worker_state` in every worker.
    """
    if processes <= 1:
        _init_worker(state)
        for item in items:
            yield function(item)
        return
    # fork: workers start in milliseconds and inherit the state without pickling it.
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    max_in_flight = max_in_flight or 2 * processes
    pending = collections.deque()
    with context.Pool(processes, initializer=_init_worker, initargs=(state,)) as pool:
        for item in items:
            pending.append(pool.apply_async(function, (item,)))
            if len(pending) >= max_in_flight:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
