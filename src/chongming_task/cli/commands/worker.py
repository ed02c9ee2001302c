"""``worker --tasks MODULE``: the long-lived daemon, in the foreground.

Meant for systemd, nohup or a container: it logs what it does as plain lines,
reconciles at start, takes submitted tasks, serves commands from other processes
and, on SIGTERM or Ctrl-C, stops what it holds within ``--shutdown-timeout`` and
reports each task it stopped. Exit code 0 when every task stopped in time, 1 when
some did not (their leases expire and ``reconcile`` will mark them ``lost``).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from chongming_task.cli.commands._common import add_tasks_option, new_parser, node_controller
from chongming_task.cli.errors import CommandFailed, ExitCode, UsageError, one_line
from chongming_task.cli.loader import load_task_module, module_schedules, register_tasks
from chongming_task.cli.logs import library_logging
from chongming_task.cli.parsing import env, format_buckets, integer, seconds
from chongming_task.cli.signals import on_shutdown_signals
from chongming_task.errors import ConfigurationError, TaskError

if TYPE_CHECKING:
    from chongming_task.cli.session import Session

__all__ = ["add_parsers"]

#: Finished runs a worker keeps holding: enough for a look from Python at recent work,
#: while a daemon that runs for weeks does not keep every task it ever ran in memory.
DEFAULT_KEEP_FINISHED = 1000


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers,
        "worker",
        help="run a worker daemon in the foreground (takes submitted tasks)",
        handler=cmd_worker,
        json=False,
    )
    add_tasks_option(parser)
    parser.add_argument(
        "--max-parallel",
        type=integer,
        default=None,
        metavar="N",
        help="tasks run at once (env CHONGMING_MAX_PARALLEL; default 4)",
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=seconds,
        default=30.0,
        metavar="SECONDS",
        help="how long SIGTERM waits for running tasks to stop (default 30)",
    )
    parser.add_argument(
        "--lease-ttl",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="lease of held tasks: how soon after a crash reconcile may call them lost "
        "(default 30)",
    )
    parser.add_argument(
        "--keep-finished",
        type=integer,
        default=DEFAULT_KEEP_FINISHED,
        metavar="N",
        help="finished tasks the worker keeps in memory; older ones are answered from the "
        f"store, so memory stays flat however long it runs (default {DEFAULT_KEEP_FINISHED})",
    )
    parser.add_argument(
        "--metrics-port",
        type=integer,
        default=None,
        metavar="PORT",
        help="serve Prometheus /metrics on PORT (0: any free port; env CHONGMING_METRICS_PORT)",
    )
    parser.add_argument(
        "--metrics-host",
        default=None,
        metavar="HOST",
        help="interface for --metrics-port (env CHONGMING_METRICS_HOST; default 127.0.0.1)",
    )
    parser.add_argument(
        "--poll-interval",
        type=seconds,
        default=0.5,
        metavar="SECONDS",
        help="longest wait between looks for submissions (default 0.5)",
    )


def _ids(task_ids: tuple[str, ...], shown: int = 5) -> str:
    """``2 (a, b)``: a count, with the first few ids so an operator can follow up."""
    if not task_ids:
        return "0"
    more = f", +{len(task_ids) - shown} more" if len(task_ids) > shown else ""
    return f"{len(task_ids)} ({', '.join(task_ids[:shown])}{more})"


def _max_parallel(args: argparse.Namespace) -> int:
    raw = args.max_parallel if args.max_parallel is not None else env("MAX_PARALLEL", "4")
    try:
        value = int(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UsageError(f"--max-parallel must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise UsageError(f"--max-parallel must be a positive integer, got {value}")
    return value


def _scheduler(controller: Any, module: Any, spec: str) -> tuple[Any, list[str]]:
    """A Scheduler with the module's schedules, or ``(None, [])`` if it declares none."""
    apply = module_schedules(module)
    if apply is None:
        return None, []
    from chongming_task.schedule.scheduler import Scheduler

    scheduler = Scheduler(controller)
    try:
        names = apply(scheduler)
    except (TaskError, TypeError, ValueError) as exc:
        scheduler.close()
        raise CommandFailed(
            f"task module {spec!r}: its schedules were refused: {one_line(str(exc))}"
        ) from exc
    return scheduler, names


def _metrics_port(args: argparse.Namespace) -> int | None:
    raw = args.metrics_port if args.metrics_port is not None else env("METRICS_PORT")
    if raw is None:
        return None
    try:
        port = int(raw)
    except (TypeError, ValueError):
        raise UsageError(f"--metrics-port must be a port number, got {raw!r}") from None
    if not 0 <= port <= 65535:
        raise UsageError(f"--metrics-port must be in 0..65535, got {port}")
    return port


def _expose_metrics(controller: Any, scheduler: Any, port: int, host: str) -> Any:
    """Serve ``/metrics`` for this worker (the ``prometheus`` extra)."""
    from chongming_task.observability.server import expose_metrics

    try:
        return expose_metrics(controller, port, host=host, scheduler=scheduler)
    except ConfigurationError as exc:
        raise CommandFailed(str(exc)) from exc


def cmd_worker(args: argparse.Namespace, session: Session) -> int:
    from chongming_task.worker import Worker

    max_parallel = _max_parallel(args)
    metrics_port = _metrics_port(args)
    metrics_host = args.metrics_host or env("METRICS_HOST", "127.0.0.1") or "127.0.0.1"
    if args.shutdown_timeout <= 0 or args.poll_interval <= 0:
        raise UsageError("--shutdown-timeout and --poll-interval must be > 0 seconds")
    if args.lease_ttl is not None and args.lease_ttl <= 0:
        raise UsageError(f"--lease-ttl must be > 0 seconds, got {args.lease_ttl:g}")
    if args.keep_finished < 0:
        raise UsageError(
            f"--keep-finished must be a number of tasks >= 0, got {args.keep_finished}"
        )
    spec = args.tasks or env("TASKS") or ""
    module = load_task_module(spec)
    output = session.output
    with library_logging(output, info=True):
        store = session.open_store(create=True)
        controller = node_controller(
            session,
            store,
            max_parallel=max_parallel,
            lease_ttl=args.lease_ttl,
            keep_finished=args.keep_finished,
        )
        names = register_tasks(controller, module, spec)
        scheduler, schedule_names = _scheduler(controller, module, spec)
        worker = Worker(
            controller,
            max_parallel=max_parallel,
            poll_interval=args.poll_interval,
            scheduler=scheduler,
        )
        owned = session.options.owned_buckets
        output.print(
            f"worker {controller.owner} on {session.options.shown_db}: tasks {', '.join(names)}; "
            f"max_parallel {max_parallel}; buckets "
            f"{'all' if owned is None else format_buckets(owned)} of "
            f"{session.options.num_buckets}"
        )
        if schedule_names:
            output.print(f"schedules: {', '.join(schedule_names)}")
        metrics = None
        if metrics_port is not None:
            metrics = session.on_close(
                _expose_metrics(controller, scheduler, metrics_port, metrics_host)
            )
            output.print(f"metrics: {metrics.url}")
        received: list[str] = []

        def on_signal(name: str) -> None:
            received.append(name)
            worker.request_shutdown()

        with on_shutdown_signals(on_signal):
            report = worker.start()
            output.print(
                f"reconciled: {_ids(report.lost)} lost, {_ids(report.adoptable)} adoptable "
                f"(resubmit to run), {_ids(report.skipped)} skipped"
            )
            output.print("ready; stop with Ctrl-C or SIGTERM")
            try:
                while not worker.wait(0.5):
                    pass
            except KeyboardInterrupt:  # a signal raced the handler installation
                received.append("SIGINT")
            signal_name = received[0] if received else "shutdown"
            held = sum(1 for run in controller.runs() if not run.done)
            output.print(
                f"{signal_name}: shutting down; stopping {held} task(s) "
                f"(deadline {args.shutdown_timeout:g}s)"
            )
            shutdown = worker.shutdown(
                reason=f"worker shutdown ({signal_name})", timeout=args.shutdown_timeout
            )
        for task in shutdown.tasks:
            note = "" if task.finished else "  (did not stop in time)"
            output.print(f"  {task.task_id} ({task.name}): {task.before} -> {task.after}{note}")
        output.print(
            f"worker {controller.owner} stopped: took {worker.accepted} task(s), "
            f"stopped {len(shutdown.tasks) - len(shutdown.unfinished)}, "
            f"unfinished {len(shutdown.unfinished)}"
        )
    return ExitCode.OK if shutdown.clean else ExitCode.FAILED
