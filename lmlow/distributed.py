"""Training on several processes (GPUs, or CPU processes) with PyTorch's own engine: torchrun
starts the processes and DistributedDataParallel (DDP) all-reduces the gradients.

How one run is split over N processes ("ranks"), and why each rule keeps it exact:

- **The batch.** The training stream is cut into the configured ``batch_size`` columns, as in
  one process, and rank r trains columns [r B/N, (r+1) B/N). Each rank's loss is a mean over
  its tokens and DDP averages the ranks' gradients, which is the mean over the global batch:
  ``batch_size`` and ``lr`` mean what they mean in one process (no rescaling rule needed).
- **Randomness.** Every rank draws the same sequence lengths (one Python generator seeded
  with ``seed``) and its own dropout masks (torch seeded from (seed, rank)): a run is
  reproducible with the same number of processes (not bit for bit across numbers: the
  masks, and the order of float sums, differ).
- **Validation** is sharded: each rank scores some of the pieces, the per-token scores are
  summed over the ranks, so every rank holds the same numbers a single process computes (and
  NT-ASGD, early stopping and learning-rate decays decide identically everywhere).
- **Decisions from clocks and signals** (a time budget, the periodic save, SIGTERM) are taken
  together every ``SYNC_EVERY`` updates by an all-reduce, so the ranks never part ways.
- **Gradient sums.** With 3 or more ranks the all-reduce adds an element's values in an
  order set by its place in DDP's buckets, which DDP lays out anew after its first backward:
  the Trainer makes one throw-away backward first (``Trainer._settle_buckets``), so that every
  update of a new or a resumed run sums in the same order.
- **Files.** Only rank 0 writes the run folder. ``last.pt`` holds every rank's random state
  and the hidden state of the whole batch, gathered to rank 0; a resume needs the same number
  of processes.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import torch

from lmlow.errors import LmlowError, Said

TIMEOUT = timedelta(minutes=30)   # a rank waits this long at a collective before giving up


@dataclass(frozen=True)
class World:
    """This process's place among the training processes (one process: rank 0 of 1)."""
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1

    @property
    def main(self) -> bool:
        """Rank 0: the one process that writes files and prints."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1


SINGLE = World()


def world_from_env(env=os.environ) -> World:
    """The world torchrun describes in the environment (RANK, WORLD_SIZE, LOCAL_RANK,
    LOCAL_WORLD_SIZE); one process when WORLD_SIZE is unset."""
    if "WORLD_SIZE" not in env:
        return SINGLE
    try:
        size = int(env["WORLD_SIZE"])
        world = World(int(env.get("RANK", 0)), size, int(env.get("LOCAL_RANK", 0)),
                      int(env.get("LOCAL_WORLD_SIZE", size)))
    except ValueError:
        raise LmlowError("RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE must be integers "
                         "(torchrun sets them)") from None
    if not 0 <= world.rank < world.size or not 0 <= world.local_rank < world.local_size:
        raise LmlowError(f"RANK {world.rank} / WORLD_SIZE {world.size} (LOCAL_RANK "
                         f"{world.local_rank} / LOCAL_WORLD_SIZE {world.local_size}) are not "
                         "a valid process layout")
    return world


def join(device_name: str) -> tuple[World, torch.device]:
    """Join the process group torchrun set up (nothing in one process) and pick this rank's
    device: GPU ``LOCAL_RANK`` with NCCL, or the CPU with gloo."""
    from lmlow.checkpoint import pick_device

    world = world_from_env()
    device = pick_device(device_name)
    if not world.distributed:
        return world, device
    import torch.distributed as dist

    if device.type == "cuda":
        if world.local_rank >= torch.cuda.device_count():
            raise LmlowError(f"{world.local_size} processes on this node but "
                             f"{torch.cuda.device_count()} GPUs visible: give torchrun "
                             "--nproc-per-node at most the number of GPUs")
        device = torch.device("cuda", world.local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        missing = [v for v in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(v)]
        if missing:      # torch's own error for it is a traceback from its rendezvous
            raise LmlowError(f"WORLD_SIZE {world.size} is set but {' and '.join(missing)} "
                             f"{'is' if len(missing) == 1 else 'are'} not: start the "
                             "processes with torchrun (which sets them all) or with "
                             "`lmlow train --nproc N`")
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=world.rank,
                                world_size=world.size, timeout=TIMEOUT)
    return world, device


def leave(world: World) -> None:
    """Leave the process group at the end of training, all ranks together (a barrier first,
    so that no rank tears gloo down while a peer is still in a collective)."""
    if world.distributed:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()


def end_process(code: int) -> None:
    """End a training process started by torchrun now, with exit status ``code``, skipping
    the interpreter's shutdown. Why: gloo's worker threads free the last collectives' work
    objects a moment after the collective returns, and those hold tensors owned by Python; if
    that moment falls inside Python's shutdown the thread cannot take the interpreter lock and
    the process aborts ("terminate called without an active exception", SIGABRT) after a
    finished run, failing the whole torchrun (measured on a busy 2-core machine: 8 of 40
    2-process runs; ``destroy_process_group`` and a barrier do not prevent it, since torch keeps
    the group alive). Every file of the run is written atomically before this, so nothing is
    lost; this flushes what was printed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):    # a closed pipe: nothing left to say there
            pass
    os._exit(code)


# what gloo and NCCL say when a peer process has gone (it printed its own error)
_PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "Broken pipe",
              "remote worker crashing", "NCCL communicator was aborted")


def peer_failed(e: BaseException) -> bool:
    """Whether ``e``, in a training process under torchrun, is a collective that failed
    because another process stopped (its own one-line error is the reason): one line for
    this process, not a traceback from inside autograd."""
    if "WORLD_SIZE" not in os.environ:
        return False
    import torch.distributed as dist

    return isinstance(e, getattr(dist, "DistError", ())) or any(m in str(e) for m in _PEER_GONE)


def rank_seed(seed: int, rank: int) -> int:
    """Torch's seed for one rank's dropout masks: independent streams for every (seed, rank)."""
    return int(np.random.SeedSequence([seed, rank]).generate_state(1, np.uint64)[0])


def columns(world: World, batch_size: int) -> slice:
    """The batch columns this rank trains."""
    if batch_size % world.size:
        raise LmlowError(f"--batch-size {batch_size} cannot be split evenly over --nproc "
                         f"{world.size} processes: give a multiple of {world.size}")
    k = batch_size // world.size
    return slice(world.rank * k, (world.rank + 1) * k)


def require_processes(checkpoint: dict, path, size: int) -> None:
    """Refuse to resume ``checkpoint`` (read from ``path``) with another number of processes
    than wrote it: random streams and hidden states are per process."""
    processes = checkpoint.get("processes", 1)
    if processes != size:
        raise LmlowError(f"{path} was written by {processes} training process(es), and this "
                         f"resume has {size}: random streams and hidden states are per process, "
                         f"so resume with {processes} (`lmlow train --resume RUN_DIR --nproc "
                         f"{processes}`)")


def wrap(world: World, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """The module the training step calls: DDP around ``model`` on several processes (its
    frozen parameters are left out of the all-reduce), the model itself in one."""
    if not world.distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel as DDP

    return DDP(model, device_ids=[device.index] if device.type == "cuda" else None,
               gradient_as_bucket_view=True)    # (the model has no buffers to broadcast)


def _comm_device() -> torch.device:
    import torch.distributed as dist
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_sum(world: World, *arrays: np.ndarray) -> list[np.ndarray]:
    """Each array summed over the ranks (float64), in one all-reduce."""
    if not world.distributed:
        return [np.asarray(a, np.float64) for a in arrays]
    import torch.distributed as dist

    flat = np.concatenate([np.asarray(a, np.float64).ravel() for a in arrays])
    t = torch.from_numpy(flat).to(_comm_device())
    dist.all_reduce(t)
    out, i = [], 0
    flat = t.cpu().numpy()
    for a in arrays:
        n = np.asarray(a).size
        out.append(flat[i:i + n].reshape(np.shape(a)))
        i += n
    return out


def all_max(world: World, values: list[float]) -> list[float]:
    """The largest of each value over the ranks: how ranks agree on a clock or a flag."""
    if not world.distributed:
        return list(values)
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.float64, device=_comm_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.cpu().tolist()


def gather(world: World, obj) -> list | None:
    """Every rank's ``obj``, in rank order, on rank 0 (None elsewhere)."""
    if not world.distributed:
        return [obj]
    import torch.distributed as dist

    out = [None] * world.size if world.main else None
    dist.gather_object(obj, out, dst=0)
    return out


LAUNCHER = "LMLOW_LAUNCHER_PID"   # set by launch() for its processes: the launcher's pid
SHUTDOWN_GRACE = 600   # seconds the launcher gives its processes to stop after a signal


def shutdown_grace(env=os.environ) -> int:
    """How long torchrun's agent waits for the processes it forwarded a SIGTERM or SIGINT to
    before it kills them: ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT`` if set (torchrun's own knob), else
    ``SHUTDOWN_GRACE``. Why not torchrun's 30 s: a stop saves ``last.pt`` after the update in
    progress, which a large model on CPU processes or a slow disk can take longer than that;
    killed, the processes lost everything since the last save (measured: 2 CPU processes of
    a 1500-unit model, 20 updates in about 60 s, SIGKILLed 30 s after a SIGTERM)."""
    value = env.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT")
    if value is None:
        return SHUTDOWN_GRACE
    try:
        seconds = int(value)
    except ValueError:
        seconds = -1
    if seconds < 0:
        raise LmlowError(f"TORCH_ELASTIC_SHUTDOWN_TIMEOUT={value!r}: give whole seconds (>= 0) "
                         "that the training processes have to stop after a signal")
    return seconds


class _Kills(logging.Handler):
    """Counts the processes torchrun's agent killed because they had not stopped within the
    grace after a signal (what its log says: lmlow shows none of the log)."""

    def __init__(self):
        super().__init__()
        self.killed = 0

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("Unable to shutdown process"):
            self.killed += 1


def launch(nproc: int, argv: list[str]) -> tuple[int, list[str]]:
    """Run ``lmlow ARGV`` in ``nproc`` processes on this machine through torchrun's own
    launcher (what ``torchrun --standalone --nproc-per-node N -m lmlow ARGV`` does). Returns
    the exit status (0, or the first failed one) and the lines left to say: process 0 prints
    its own error; the others hand theirs to the launcher (cli._error), which says those
    that differ from process 0's (one for each distinct line); and what no process could say
    (one was killed by a signal)."""
    import dataclasses
    import uuid

    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    grace = shutdown_grace()
    extra = ({"shutdown_timeout": grace}      # recent torch; older: 30 s
             if "shutdown_timeout" in {f.name for f in dataclasses.fields(LaunchConfig)} else {})
    # the workers speak for themselves: torch's log stays out of sight, and is only read for
    # the processes its agent killed. (Its modules' loggers have levels of their own, set
    # from LOGLEVEL: a level on their parent did not hide "Received 15 death signal"; not
    # passing their records up to torch's handler does.)
    kills = _Kills()
    logs = [logging.getLogger(n) for n in ("torch.distributed.elastic", "torch.distributed.launcher")]
    saved = [(log.level, log.propagate) for log in logs]
    for log in logs:
        log.setLevel(logging.WARNING)
        log.propagate = False
        log.addHandler(kills)
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id=str(uuid.uuid4()),
                          rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=0,
                          monitor_interval=0.5, **extra)
    os.environ.setdefault("OMP_NUM_THREADS", "1")   # each process sets its share (--threads)
    os.environ[LAUNCHER] = str(os.getpid())         # the processes follow this one (below)
    try:
        elastic_launch(config, sys.executable)("-m", "lmlow", *argv)
    except ChildFailedError as e:
        failures = sorted(e.failures.items())
        for rank, f in failures:
            if f.exitcode < 0:     # killed: it printed nothing
                return 128 - f.exitcode, [f"training process {rank} was killed by "
                                          f"{_signal_name(-f.exitcode)} (from outside lmlow: "
                                          "out of memory, or a kill)"]
        # the lines the processes handed over (torch makes up a message where none did)
        handed = {rank: m for rank, f in failures
                  if isinstance(m := getattr(f, "error_file_data", {}).get("message"), str) and m}
        said, lines = {handed.get(0)}, []
        for rank, line in handed.items():
            if line not in said:
                said.add(line)
                lines.append(f"process {rank}: {line}")
        return next((f.exitcode for _, f in failures if f.exitcode > 0), 1), lines
    except SignalException as e:     # this launcher was told to stop: so were the workers
        name = _signal_name(int(e.sigval))
        killed = [f"{name}: {kills.killed} of the {nproc} training processes did not stop "
                  f"within {grace} s and were killed (TORCH_ELASTIC_SHUTDOWN_TIMEOUT gives them "
                  "longer); the run resumes from its last save before"] if kills.killed else []
        return 128 + int(e.sigval), killed
    finally:
        os.environ.pop(LAUNCHER, None)
        for log, (level, propagate) in zip(logs, saved):
            log.removeHandler(kills)
            log.setLevel(level)
            log.propagate = propagate
    return 0, []


def follow_launcher(env=os.environ) -> None:
    """In a process that ``lmlow train --nproc`` started: SIGTERM when the launcher dies, so
    that a launcher killed by SIGKILL (which it cannot pass on) does not leave its processes
    training on as orphans, holding the run's lock (a resume was refused: "being trained by
    pid ..."); they save ``last.pt`` and exit as on any SIGTERM. Linux's PR_SET_PDEATHSIG,
    whose signal comes when the thread that started this process ends: torchrun's agent runs
    in the launcher's main thread, which started it. Keyed on the launcher's pid in the
    environment (``LAUNCHER``), so processes that torchrun started (a user's own torchrun,
    whose agent may live on) are left as they were; if the launcher is already gone, now."""
    pid = env.get(LAUNCHER)
    if not pid or not sys.platform.startswith("linux"):
        return
    import ctypes

    PR_SET_PDEATHSIG = 1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):     # no prctl: the launcher's SIGTERM still comes
        return
    if str(os.getppid()) != pid:          # it died before the line above
        os.kill(os.getpid(), signal.SIGTERM)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def without_nproc(argv: list[str]) -> list[str]:
    """The command line without its ``--nproc N``, as the processes run it, however it was
    written: ``--nproc N``, ``--nproc=N``, or an abbreviation argparse took for it (``--npro 2``:
    left in, every process refused it as already under torchrun). Any prefix of ``--nproc``
    that argparse accepted is one: it takes a prefix only when one option has it."""
    kept, skip = [], False
    for a in argv:
        name = a.split("=", 1)[0]
        if skip:
            skip = False
        elif len(name) > 2 and "--nproc".startswith(name):
            skip = "=" not in a
        else:
            kept.append(a)
    return kept


def relaunch(nproc: int, argv: list[str]) -> None:
    """``lmlow train ... --nproc N``: the same command, without ``--nproc``, in N processes
    under torchrun's launcher; a line only for what the processes could not say themselves."""
    if "WORLD_SIZE" in os.environ:
        raise LmlowError("--nproc: already running under torchrun (WORLD_SIZE is set); give "
                         "the number of processes to torchrun only")
    code, unsaid = launch(nproc, without_nproc(argv))
    if code:
        for line in unsaid[:-1]:
            print(f"lmlow: error: {line}", file=sys.stderr)
        if unsaid:
            raise LmlowError(unsaid[-1], exit_code=code)
        raise Said(f"the {nproc} training processes ended with exit status {code}", code)


def check_resumable(last: "Path", nproc: int, device: str | None = None) -> None:
    """--resume --nproc N: the run has a checkpoint, trained with N processes, and this
    machine has a GPU for each process if it resumes on GPUs (``device``: --device, if given
    with --resume, else the run's own); said once, here, rather than by every process."""
    from lmlow.checkpoint import load_checkpoint

    if not last.exists():
        raise LmlowError(f"{last}: no such checkpoint")
    ck = load_checkpoint(last, mmap=True)      # two fields of it: its tensors stay on disk
    require_processes(ck, last, nproc)
    check_gpus(device or ck["config"].get("device", "auto"), nproc)


def check_gpus(device_name: str, nproc: int) -> None:
    """N processes that train on GPUs need N GPUs on this machine (NCCL gives each process
    its own): said before torchrun starts them, with the two ways out. Why here: with
    ``--device auto`` a machine with one GPU picks CUDA, and every process but the first would
    otherwise fail on its own, after the launch."""
    from lmlow.checkpoint import pick_device

    if pick_device(device_name).type != "cuda":
        return
    gpus = torch.cuda.device_count()
    if nproc > gpus:
        raise LmlowError(f"--nproc {nproc}: {gpus} GPU{'s' * (gpus != 1)} visible on this "
                         f"machine and one is needed per process; give --nproc {gpus} or "
                         "less, or --device cpu to train the processes on the CPU (gloo)")
