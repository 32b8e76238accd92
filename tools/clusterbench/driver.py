"""One benchmark run: the environment, the loop over profiles x links x
methods, and the result (JSON, Markdown, PNG, stdout) with its exit status."""

import datetime
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile

from clusterbench import ROOT, BenchError, collect, report, run
from gwtools import rates, results as result_files, spec
import emulated_cluster
import model_profiles
import planner_validation


def _proc_field(path, prefix, parse):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(prefix):
                    return parse(line)
    except OSError:
        pass
    return None


def _git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True).stdout.strip()


def machine_info():
    cpu = _proc_field("/proc/cpuinfo", "model name", lambda l: l.split(":", 1)[1].strip())
    mem = _proc_field("/proc/meminfo", "MemTotal", lambda l: round(int(l.split()[1]) / 2**20, 1))
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return {"hostname": socket.gethostname(), "cpu": cpu or "unknown", "cores": os.cpu_count(),
            "memory_gib": mem, "kernel": platform.release(), "os": platform.platform(),
            "python": platform.python_version(),
            "git_commit": _git("rev-parse", "--short", "HEAD") + ("-dirty" if dirty else ""),
            "loadavg_start": list(os.getloadavg())}


def environment(a):
    """Whether namespaces (and netem) work here; None and a message when the
    run cannot go on as asked."""
    ns_ok, ns_why = ((False, "--loopback given") if a.loopback
                     else emulated_cluster.namespaces_available())
    netem_ok, netem_why = emulated_cluster.netem_available() if ns_ok else (False, "no namespaces")
    if not ns_ok:
        print(f"cluster_bench: network namespaces unavailable ({ns_why}): running every rank on "
              "loopback; results are UNSHAPED (no link rate applies)", file=sys.stderr)
    if ns_ok and rates.parse_time(a.delay) > 0 and not netem_ok:
        return None, f"--delay {a.delay} needs netem, but {netem_why}"
    return {"ns_ok": ns_ok, "ns_why": ns_why, "netem_ok": netem_ok, "netem_why": netem_why,
            "links": a.link_list if ns_ok else ["loopback"]}, None


def check_binaries(a):
    """A message when a binary the run needs is missing, else None."""
    if a.methods_parsed and not os.access(a.exchange_bench, os.X_OK):
        return (f"{a.exchange_bench} not found: build it first (bazel build "
                "//tools:exchange_bench) or pass --exchange_bench")
    if a.peer_list and not os.access(a.python, os.X_OK):
        return (f"{a.python} not found (the DDP peers need Debian's python3-torch); "
                "pass --peers= to skip them")
    return None


def build_config(a, env, now):
    ns_ok, netem_ok = env["ns_ok"], env["netem_ok"]
    torch_version = subprocess.run(
        [a.python, "-c", "import torch; print(torch.__version__)"], stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True).stdout.strip() if a.peer_list else None
    links = env["links"]
    return {
        "date_utc": now.strftime("%Y-%m-%d %H:%M:%S UTC"), "machine": machine_info(),
        "namespaces": {"available": ns_ok, "why_not": env["ns_why"] or None},
        "netem": {"available": netem_ok, "why_not": env["netem_why"] or None},
        "shaped": ns_ok,
        "shaping": (f"{a.shaper} on both ends of every host link (host egress and switch-port "
                    "egress), burst max(2 ms of traffic, 128 KiB); ranks within a host use its "
                    "loopback, unshaped" if ns_ok else "none: loopback"),
        "shaper": a.shaper if ns_ok else None,
        "delay": a.delay, "hosts": a.hosts, "ranks_per_host": a.ranks_per_host,
        "world_size": a.world, "links": links, "profiles": a.profile_list,
        "methods": [m["name"] for m in a.methods_parsed], "hierarchical": a.hierarchical,
        "peers": a.peer_list, "iters": a.iters, "warmup": a.warmup,
        "bucket_size_mb": a.bucket_size_mb,
        "pipeline_depth": a.pipeline_depth or "exchange_bench default",
        "event_loop_nice": a.event_loop_nice, "bucket_views": bool(a.bucket_views),
        "torch_version": torch_version, "tcp_goodput_factor": collect.TCP_GOODPUT,
        "command": " ".join(["cluster_bench.py"] + a.argv),
        "cluster": (f"{a.hosts} emulated hosts x {a.ranks_per_host} ranks, "
                    f"{'/'.join(links)} links, delay {a.delay if netem_ok else '0 (no netem)'}"
                    if ns_ok else f"{a.world} ranks on loopback (UNSHAPED)"),
    }


class Runner:
    """Runs every case of the run, appending to `results` as it goes."""

    def __init__(self, a, env, bench, results):
        self.a, self.env, self.bench, self.results = a, env, bench, results
        self.run_transport = bool(a.transport_bench) and a.hosts >= 2
        if self.run_transport and not os.access(a.transport_bench, os.X_OK):
            print(f"cluster_bench: no {a.transport_bench} (bazel build //bench/transport:"
                  "transport_bench): skipping the transport-only figures", file=sys.stderr)
            self.run_transport = False
        self.probe = self.probing() and self.write_shapes("latency-probe", [[64]])

    def probing(self):
        return self.env["ns_ok"] and not self.a.no_latency_probe and bool(self.a.methods_parsed)

    def total_cases(self):
        a, links = self.a, self.env["links"]
        per_link = len(a.methods_parsed) + len(a.peer_list) + self.run_transport
        return len(a.profile_list) * len(links) * per_link + self.probing() * len(links)

    def write_shapes(self, name, shapes):
        path = os.path.join(self.bench.run_dir, f"profile-{name}.txt")
        with open(path, "w") as f:
            f.write("\n".join("x".join(str(d) for d in s) for s in shapes) + "\n")
        return path

    def alone_figures(self, prof, profile_file):
        """Per canonical spec: the codec's time and CPU alone, and the CPU per
        rank-step of the run's ranks on loopback."""
        alone = {}
        if self.a.no_alone:
            return alone
        for m in self.a.methods_parsed:
            if m["codec"] == "none":
                continue
            if m["spec"] not in alone:
                sys.stderr.write(f"[alone] {prof} {m['spec_text']}: compression time of one "
                                 "rank with the machine to itself\n")
                ms, cpu = self.bench.compression_alone(profile_file, m)
                alone[m["spec"]] = {"compress_ms": ms, "cpu_ms": cpu}
            entry = alone[m["spec"]]
            key = "loopback_cpu_ms_hierarchical" if m["hierarchical"] else "loopback_cpu_ms"
            if self.a.world > 1 and key not in entry:
                sys.stderr.write(f"[cpu] {prof} {m['name']}: {self.a.world} ranks on loopback, "
                                 "CPU per rank-step\n")
                entry[key] = self.bench.exchange_cpu_loopback(profile_file, m,
                                                              hierarchical=m["hierarchical"])
        return alone

    def latency_probe(self, cluster, link, label):
        """A 64-float dense allreduce: gradwire's agreement allgather (P-1 steps)
        then the ring (2(P-1) steps) of one tiny message each, so iter / (3(P-1))
        is the per-message latency (alpha) of this cluster as loaded right now."""
        res = self.bench.run_gradwire(cluster, self.probe, spec.method("none"),
                                      label + " latency probe")[0]
        hops = 3 * (self.a.world - 1)
        self.results["latency_probe"][link] = {
            "iter_ms_median": res["iter_ms"]["median"], "iter_ms_p90": res["iter_ms"]["p90"],
            "ring_steps": hops, "alpha_us": res["iter_ms"]["median"] * 1e3 / hops}

    def run_link(self, cluster, where, profile_file, profile_args, alone):
        a, f = self.a, where.fields
        label = f"{f['profile']} {f['link']}"
        if self.probe and f["link"] not in self.results["latency_probe"]:
            self.latency_probe(cluster, f["link"], label)
        cases, dense = [], None
        for m in a.methods_parsed:
            res = self.bench.run_gradwire(cluster, profile_file, m, label)
            case = collect.gradwire_case(where, m, res, alone)
            dense = case if m["codec"] == "none" else dense
            collect.derive(case, f["link_bps"], self.env["ns_ok"], dense)
            cases.append(case)
            self.results["cases"].append(case)
        if self.run_transport:
            tb = self.bench.run_transport(cluster, f["params"], label)
            self.results["transport"].setdefault(f["profile"], {})[f["link"]] = (
                collect.transport_figures(tb, f["link_bps"]))
        for peer in a.peer_list:
            case = collect.ddp_case(where, self.bench.run_ddp(cluster, profile_args, peer, label))
            if dense is not None:
                case["speedup"] = dense["iter_ms_median"] / case["iter_ms_median"]
            cases.append(case)
            self.results["cases"].append(case)
        collect.best_dense(cases)

    def run_profile(self, prof):
        if prof.startswith("params="):
            shapes = model_profiles.profile(None, int(prof.split("=")[1]))
            profile_args = [f"--params={prof.split('=')[1]}"]
        else:
            shapes = model_profiles.profile(prof)
            profile_args = [f"--profile={prof}"]
        profile_file = self.write_shapes(prof, shapes)
        n_params = sum(model_profiles.numel(s) for s in shapes)
        alone = self.alone_figures(prof, profile_file)
        for link in self.env["links"]:
            rate = rates.parse_rate(link) if self.env["ns_ok"] else None
            where = collect.Where(self.a, prof, n_params, link, rate)
            if not self.env["ns_ok"]:
                self.run_link(None, where, profile_file, profile_args, alone)
                continue
            with emulated_cluster.EmulatedCluster(
                    self.a.hosts, link,
                    delay=self.a.delay if self.env["netem_ok"] else "0us",
                    shaper=self.a.shaper) as cluster:
                self.run_link(cluster, where, profile_file, profile_args, alone)

    def run_all(self):
        """Every case; returns None, or the failure that stopped the run."""
        try:
            for prof in self.a.profile_list:
                self.run_profile(prof)
        except run.CaseFailed as e:
            print(f"\ncluster_bench: {e.label} failed; the run stops here", file=sys.stderr)
            return {"reason": e.outcome.headline(), **e.to_json()}
        except BenchError as e:
            return {"reason": str(e)}
        except emulated_cluster.ClusterError as e:
            return {"reason": f"cannot emulate the cluster: {e}"}
        except KeyboardInterrupt:
            return {"reason": "interrupted (namespaces removed)", "interrupted": True}
        return None


def finish(a, results, failure, run_dir, stem):
    """Writes the JSON and Markdown, prints the report, draws the PNG;
    returns the exit status (1 for an incomplete run, 130 if interrupted)."""
    cfg = results["config"]
    cfg["machine"]["loadavg_end"] = list(os.getloadavg())
    cfg["complete"] = failure is None
    if failure is not None:
        results["failure"] = failure
    if failure is not None or a.keep_logs:
        cfg["logs_dir"] = run_dir
    else:
        shutil.rmtree(run_dir, ignore_errors=True)
    results["planner_validation"] = []
    try:  # the performance model checks itself against this run
        results["planner_validation"], _ = planner_validation.validate(results, a.alpha_us * 1e-6)
    except (KeyError, ValueError, ZeroDivisionError) as e:
        results["planner_error"] = str(e)
    results["targets"] = collect.evaluate_targets(results) if results["cases"] else []
    paths = {ext: os.path.join(a.out_dir, f"{stem}.{ext}") for ext in ("json", "md", "png")}
    result_files.write_json(paths["json"], results)
    with open(paths["md"], "w") as f:
        f.write(report.markdown(results))
    banner = report.incomplete(results)
    if banner:
        print(f"\n{banner}")
    if results["cases"]:
        print()
        report.print_table(results)
        report.print_extras(results, a.alpha_us)
        try:
            report.plot(results, paths["png"])
            print(f"\nplot: {paths['png']}")
        except Exception as e:  # a missing matplotlib must not lose the figures
            print(f"\ncluster_bench: no plot ({e}); install python3-matplotlib", file=sys.stderr)
    report.print_failure(results)
    print(f"results: {paths['json']} and {paths['md']}")
    if failure is None:
        return 0
    return 130 if failure.get("interrupted") else 1


def main(a):
    problem = check_binaries(a)
    env, env_problem = environment(a)
    if problem or env_problem:
        print(f"cluster_bench: {problem or env_problem}", file=sys.stderr)
        return 2
    now = datetime.datetime.now(datetime.timezone.utc)
    stem = a.name or "cluster_bench-" + now.strftime("%Y%m%dT%H%M%SZ")
    os.makedirs(a.out_dir, exist_ok=True)
    run_dir = tempfile.mkdtemp(prefix="gradwire-cluster-bench-")
    bench = run.Bench(a, run_dir)
    results = {"config": build_config(a, env, now), "cases": [], "latency_probe": {},
               "transport": {}}
    runner = Runner(a, env, bench, results)
    bench.progress.total = runner.total_cases()
    failure = runner.run_all()
    return finish(a, results, failure, run_dir, stem)
