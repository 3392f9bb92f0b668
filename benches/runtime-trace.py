#!/usr/bin/env python3
"""runtime-trace.py PERF-DATA: what cnibox's Docker runtime adds per `docker run`, from the
kernel's process events (perf record -e sched:sched_process_{fork,exec,exit}) of alternating
`docker run --rm --runtime cnibox` and plain `docker run --rm` calls, then hook pairs alone.

`docker run --rm` spreads ±50 ms on a small VM, so the difference of two series' medians
cannot resolve a few milliseconds. What the runtime changes is a few spans on the
container's critical path, and the kernel timestamps each of them:
  * oci-wrap: from its exec to its exec of runc (every runtime call goes through it);
  * runc: its processes' lifetimes in a cnibox run, without the hooks it waits for, against
    the same in a plain run (the hooks' entries in config.json: forking them, feeding them
    the state, waiting);
  * the hooks: exec to exit inside Docker (parent runc), against the same ADD and DEL alone
    (parent bash, the bench's hook pairs): what Docker's hooks cost beyond their own work.
Prints `name value` lines: ms per docker run (medians over runs; the hooks alone per pair).
"""
import collections
import statistics
import subprocess
import sys

lines = subprocess.run(
    ["perf", "script", "-i", sys.argv[1], "-F", "comm,pid,time,event,trace"],
    capture_output=True, text=True, check=True,
).stdout.splitlines()

parent = {}       # pid -> comm of the process that forked it
running = {}      # pid -> (exec time, exec'd name)
spans = []        # (start, end, name, parent comm): one per exec'd program
clients = []      # (start, end) of each `docker` client call, in order
for line in lines:
    head, _, trace = line.partition(": sched:")
    parts = head.split()
    if len(parts) < 3:
        continue
    comm, pid, t = parts[0], parts[1], float(parts[2].rstrip(":"))
    event, _, rest = trace.partition(": ")
    f = dict(x.split("=", 1) for x in rest.split() if "=" in x)
    if event == "sched_process_fork":
        parent[f.get("child_pid")] = comm
    elif event == "sched_process_exec":
        if pid in running:                     # one program handing over to the next
            start, name = running[pid]
            spans.append((start, t, name, parent.get(pid)))
        running[pid] = (t, f.get("filename", "").rsplit("/", 1)[-1])
    elif event == "sched_process_exit" and pid in running:
        start, name = running.pop(pid)
        spans.append((start, t, name, parent.get(pid)))
        if name == "docker":
            clients.append((start, t))

def total(window, name, parent_comm=None):
    a, b = window
    return sum((e - s) * 1000 for s, e, n, p in spans
               if a <= s and e <= b and n == name and (parent_comm is None or p == parent_comm))

cnibox_runs, plain_runs = clients[0::2], clients[1::2]
wrapper = [total(w, "oci-wrap") for w in cnibox_runs]
hooks = [total(w, "cnibox", "runc") for w in cnibox_runs]
runc_cnibox = [total(w, "runc") - h for w, h in zip(cnibox_runs, hooks)]
runc_plain = [total(w, "runc") for w in plain_runs]
alone = sorted((s, e) for s, e, n, p in spans if n == "cnibox" and p == "bash")
pairs = [(a[1] - a[0] + b[1] - b[0]) * 1000 for a, b in zip(alone[0::2], alone[1::2])]
median = statistics.median
print(f"runs {len(cnibox_runs)} {len(plain_runs)}")
print(f"wrapper {median(wrapper):.2f}")
print(f"runc {median(runc_cnibox) - median(runc_plain):.2f}")
print(f"hook_docker {median(hooks):.2f}")
print(f"hook_alone {median(pairs) if pairs else 0:.2f}")
