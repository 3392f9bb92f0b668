#!/usr/bin/env python3
"""runtime-trace.py PERF-DATA RUNS: what cnibox's Docker runtime adds per `docker run`, from
the kernel's process events (perf record -e sched:sched_process_{fork,exec,exit}).

`docker run --rm` spreads ±50 ms on a small VM, so the difference of two series' medians
cannot resolve a few milliseconds. The runtime's own work is few, well-delimited spans on
the container's critical path, and the kernel timestamps each of them:
  * oci-wrap: from its exec to its exec of runc (every runtime call goes through it);
  * runc starting a hook: from runc's fork to the hook's exec;
  * the hooks: from exec to exit, inside Docker (parent runc) and the same ADD and DEL alone
    (parent bash, the bench's hook loop): what Docker's hooks cost beyond the hooks' own
    work is the difference.
Prints one `name value` line per figure (ms per docker run, or per hook ADD+DEL pair).
"""
import collections
import subprocess
import sys

data, runs = sys.argv[1], int(sys.argv[2])
lines = subprocess.run(
    ["perf", "script", "-i", data, "-F", "comm,pid,time,event,trace"],
    capture_output=True, text=True, check=True,
).stdout.splitlines()

parent_of = {}      # pid -> the comm of the process that forked it
forked_at = {}      # pid -> time of its fork
wrapper_exec = {}   # pid -> time oci-wrap was exec'd
hook_exec = {}      # pid -> (time of exec, the parent's comm)
spans = collections.defaultdict(float)
counts = collections.Counter()

def fields(trace):
    return dict(f.split("=", 1) for f in trace.split() if "=" in f)

for line in lines:
    head, _, trace = line.partition(": sched:")
    parts = head.split()
    if len(parts) < 3:
        continue
    comm, pid, t = parts[0], parts[1], float(parts[2].rstrip(":"))
    event, _, rest = trace.partition(": ")
    f = fields(rest)
    if event == "sched_process_fork":
        child = f.get("child_pid")
        parent_of[child] = comm
        forked_at[child] = t
    elif event == "sched_process_exec":
        name = f.get("filename", "").rsplit("/", 1)[-1]
        if pid in wrapper_exec:                       # oci-wrap handing over to runc
            spans["wrapper"] += t - wrapper_exec.pop(pid)
            counts["wrapper"] += 1
        if name == "oci-wrap":
            wrapper_exec[pid] = t
        elif name == "cnibox":                        # a hook: runc execs `cnibox oci-hook …`
            parent = parent_of.get(pid, "?")
            hook_exec[pid] = (t, parent)
            if parent == "runc" and pid in forked_at:
                spans["hook_spawn"] += t - forked_at[pid]
                counts["hook_spawn"] += 1
    elif event == "sched_process_exit":
        if pid in wrapper_exec:                       # a wrapper that never exec'd runc
            spans["wrapper"] += t - wrapper_exec.pop(pid)
            counts["wrapper"] += 1
        if pid in hook_exec:
            start, parent = hook_exec.pop(pid)
            key = "hook_docker" if parent == "runc" else "hook_alone"
            spans[key] += t - start
            counts[key] += 1

def per_run(key):
    return spans[key] * 1000 / runs

print(f"wrapper {per_run('wrapper'):.2f} {counts['wrapper'] / runs:.1f}")
print(f"hook_spawn {per_run('hook_spawn'):.2f} {counts['hook_spawn'] / runs:.1f}")
print(f"hook_docker {per_run('hook_docker'):.2f} {counts['hook_docker'] / runs:.1f}")
print(f"hook_alone {per_run('hook_alone'):.2f} {counts['hook_alone'] / runs:.1f}")
