#!/usr/bin/env python3
"""runtime-trace.py PERF-DATA: what cnibox's Docker runtime adds per `docker run`, from the
kernel's process events (perf record -e sched:sched_process_{fork,exec,exit}) of
`docker run --rm --runtime cnibox` calls, each followed by a pair of hook calls alone.

`docker run --rm` spreads ±50 ms on a small VM, so the difference of two series' medians
cannot resolve a few milliseconds. What the runtime changes is a few spans on the
container's critical path, and the kernel timestamps each of them:
  * oci-wrap: from its exec to its exec of runc (every runtime call goes through it);
  * runc starting a hook: from runc's fork to the hook's exec (its writing the state to the
    hook and its wait are inside the hook's lifetime; runc's own lifetime, ~245 ms a run,
    is as noisy as docker run itself);
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
forked = {}       # pid -> time of its fork
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
        forked[f.get("child_pid")] = t
    elif event == "sched_process_exec":
        if pid in running:                     # one program handing over to the next
            start, name = running[pid]
            spans.append((start, t, name, parent.get(pid)))
        name = f.get("filename", "").rsplit("/", 1)[-1]
        if name == "cnibox" and parent.get(pid) == "runc" and pid in forked:
            spans.append((forked[pid], t, "hook-spawn", "runc"))
        running[pid] = (t, name)
    elif event == "sched_process_exit" and pid in running:
        start, name = running.pop(pid)
        spans.append((start, t, name, parent.get(pid)))
        if name == "docker":
            clients.append((start, t))

def total(window, name, parent_comm=None):
    a, b = window
    return sum((e - s) * 1000 for s, e, n, p in spans
               if a <= s and e <= b and n == name and (parent_comm is None or p == parent_comm))

median = statistics.median
wrapper = [total(w, "oci-wrap") for w in clients]
spawn = [total(w, "hook-spawn") for w in clients]
hooks = [total(w, "cnibox", "runc") for w in clients]
alone = sorted((s, e) for s, e, n, p in spans if n == "cnibox" and p == "bash")
pairs = [(a[1] - a[0] + b[1] - b[0]) * 1000 for a, b in zip(alone[0::2], alone[1::2])]
print(f"runs {len(clients)}")
print(f"wrapper {median(wrapper):.2f}")
print(f"hook_spawn {median(spawn):.2f}")
print(f"hook_docker {median(hooks):.2f}")
print(f"hook_alone {median(pairs) if pairs else 0:.2f}")
