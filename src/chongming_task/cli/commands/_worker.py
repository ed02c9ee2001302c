"""``worker --tasks MODULE``: the long-lived daemon, in the foreground.

Meant for systemd, nohup or a container: it logs what it does on stderr, one line
per event with a UTC timestamp and a level (``--log-format json`` for log shippers),
reconciles at start, takes submitted tasks, serves commands from other processes
and, on SIGTERM or Ctrl-C, drains: it claims nothing more, lets running tasks finish
for up to ``--drain-timeout`` (a countdown in the log), then stops what is left at its
next checkpoint within ``--shutdown-timeout``, handing idempotent tasks (every queue
task with ``--requeue-on-shutdown``) back to the queue for another worker. A second
signal skips the rest of the drain. It reports each task it held; one that does not
stop in time is abandoned: marked ``lost`` and counted as lost. Exit code 0 when every
task ended, was handed back or stopped in time, 1 when any was lost.
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING, Any

from chongming_task._drain import DEFAULT_DRAIN_TIMEOUT, DEFAULT_STOP_TIMEOUT
from chongming_task.cli._errors import CommandFailed, ExitCode, UsageError, one_line
from chongming_task.cli._loader import load_task_module, module_schedules, register_tasks
from chongming_task.cli._logs import LOG_FORMATS, LOG_LEVELS, worker_logging
from chongming_task.cli._parsing import env, format_buckets, integer, seconds
from chongming_task.cli._signals import on_shutdown_signals
from chongming_task.cli.commands._common import (
    add_create_schema_option,
    add_tasks_option,
    new_parser,
    node_controller,
)
from chongming_task.errors import ConfigurationError, TaskError

if TYPE_CHECKING:
    from chongming_task.cli._session import Session

__all__ = ["add_parsers"]

#: Finished runs a worker keeps holding: enough for a look from Python at recent work,
#: while a daemon that runs for weeks does not keep every task it ever ran in memory.
DEFAULT_KEEP_FINISHED = 1000

#: ``--executor`` choices: a thread per run, or a child process per run (hard stops).
EXECUTORS = ("thread", "process")

log = logging.getLogger("chongming_task.worker")


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers,
        "worker",
        help="run a worker daemon in the foreground (takes submitted tasks)",
        handler=cmd_worker,
        json=False,
    )
    add_tasks_option(parser)
    add_create_schema_option(parser)
    parser.add_argument(
        "--max-parallel",
        type=integer,
        default=None,
        metavar="N",
        help="tasks run at once (env CHONGMING_MAX_PARALLEL; default 4)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=seconds,
        default=DEFAULT_DRAIN_TIMEOUT,
        metavar="SECONDS",
        help="on SIGTERM, how long running tasks get to finish before what is left is "
        f"stopped; 0: stop at once (default {DEFAULT_DRAIN_TIMEOUT:g})",
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=seconds,
        default=DEFAULT_STOP_TIMEOUT,
        metavar="SECONDS",
        help="after the drain, how long what is left gets to stop at a checkpoint before "
        f"it is abandoned as lost (default {DEFAULT_STOP_TIMEOUT:g})",
    )
    parser.add_argument(
        "--requeue-on-shutdown",
        action="store_true",
        help="hand every queue task the shutdown stops back to the queue, not only "
        "those of idempotent definitions (@task(idempotent=True))",
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
        "--keep-finished-for",
        metavar="AGE",
        default=None,
        help="delete finished tasks older than AGE from the store, checked periodically "
        "(90s, 30m, 12h, 7d, 2w; env CHONGMING_KEEP_FINISHED_FOR; default: keep all)",
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
        "--executor",
        choices=EXECUTORS,
        default=None,
        help="where task bodies run: thread (default) or process, a child process per "
        "run, the only executor whose stop is enforced (env CHONGMING_EXECUTOR)",
    )
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=None,
        help="least severe log lines shown (env CHONGMING_LOG_LEVEL; default info)",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=None,
        help="log lines on stderr as text (timestamp, level, message) or json, one object "
        "per line (env CHONGMING_LOG_FORMAT; default text)",
    )
    parser.add_argument(
        "--global-limit",
        action="append",
        default=None,
        metavar="TAG=N",
        help="at most N tasks tagged TAG run at once across every worker of the store "
        "(repeatable; env CHONGMING_GLOBAL_LIMITS, comma-separated)",
    )
    parser.add_argument(
        "--poll-interval",
        type=seconds,
        default=0.5,
        metavar="SECONDS",
        help="longest wait between looks for queued tasks (default 0.5)",
    )


def _named(tasks: Any) -> str:
    """``t1 (name), t2 (name)``: every task the exit summary names."""
    return ", ".join(f"{task.task_id} ({task.name})" for task in tasks)


def _report(shutdown: Any, timeout: float) -> None:
    """One line per task the worker held at shutdown: where it was, where it ended."""
    lost = {task.task_id for task in shutdown.lost}
    for task in shutdown.tasks:
        if task.task_id in lost:
            log.warning(
                "  %s (%s): %s -> lost  (did not stop within %gs; abandoned)",
                task.task_id,
                task.name,
                task.before,
                timeout,
            )
        elif task.handed_back:
            log.info(
                "  %s (%s): %s -> %s  (handed back to the queue)",
                task.task_id,
                task.name,
                task.before,
                task.after,
            )
        elif not task.finished:
            log.warning(
                "  %s (%s): %s -> %s  (did not stop in time; reconcile marks it lost)",
                task.task_id,
                task.name,
                task.before,
                task.after,
            )
        else:
            log.info("  %s (%s): %s -> %s", task.task_id, task.name, task.before, task.after)


def _ids(task_ids: tuple[str, ...], shown: int = 5) -> str:
    """``2 (a, b)``: a count, with the first few ids so an operator can follow up."""
    if not task_ids:
        return "0"
    more = f", +{len(task_ids) - shown} more" if len(task_ids) > shown else ""
    return f"{len(task_ids)} ({', '.join(task_ids[:shown])}{more})"


def _choice(args: argparse.Namespace, option: str, choices: tuple[str, ...], default: str) -> str:
    """``--option`` or ``CHONGMING_OPTION``, checked against ``choices``."""
    attribute = option.replace("-", "_")
    raw = getattr(args, attribute) or env(attribute.upper(), default) or default
    value = raw.strip().lower()
    if value not in choices:
        variable = f"CHONGMING_{attribute.upper()}"
        raise UsageError(
            f"--{option} ({variable}) must be one of {', '.join(choices)}, got {raw!r}"
        )
    return value


def _executor(name: str) -> Any:
    if name == "process":
        from chongming_task.runtime.executors import ProcessExecutor

        return ProcessExecutor()
    return None  # the controller's default ThreadExecutor


def _tracing(controller: Any) -> Any:
    """OpenTelemetry from the ``OTEL_*`` variables; a warning, not a failure, without it."""
    from chongming_task.observability import tracing_from_env, wants_tracing

    if not wants_tracing():
        return None
    try:
        tracing = tracing_from_env(controller)
    except ConfigurationError as exc:
        log.warning("tracing is off: %s", exc)
        return None
    if tracing is not None:
        log.info("tracing: OpenTelemetry spans exported with %s", tracing.exporter)
    return tracing


def _retention(args: argparse.Namespace) -> Any:
    """``--keep-finished-for`` as a ``timedelta``, or ``None`` (keep everything)."""
    from chongming_task._retention import parse_age

    raw = args.keep_finished_for or env("KEEP_FINISHED_FOR")
    if not raw:
        return None
    try:
        return parse_age(raw)
    except ConfigurationError as exc:
        raise UsageError(f"--keep-finished-for: {exc}") from None


def _start_pruner(controller: Any, age: Any, args: argparse.Namespace) -> Any:
    from chongming_task._retention import PruneReport, RetentionLoop

    def on_pass(report: PruneReport) -> None:
        if report.removed:
            log.info("retention: pruned %d finished task(s) older than %s", report.removed, age)

    def on_error(exc: BaseException) -> None:
        log.warning("retention: pruning failed (next pass retries): %s", exc)

    log.info("retention: finished tasks are kept for %s", args.keep_finished_for or age)
    return RetentionLoop(
        controller.store, age, clock=controller.clock, on_pass=on_pass, on_error=on_error
    )


def _max_parallel(args: argparse.Namespace) -> int:
    raw = args.max_parallel if args.max_parallel is not None else env("MAX_PARALLEL", "4")
    try:
        value = int(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UsageError(f"--max-parallel must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise UsageError(f"--max-parallel must be a positive integer, got {value}")
    return value


def _global_limits(args: argparse.Namespace) -> dict[str, int]:
    """``--global-limit TAG=N`` (repeated) or ``CHONGMING_GLOBAL_LIMITS=db=4,gpu=1``."""
    from chongming_task._validation import check_global_limits

    items: list[str] = list(args.global_limit or [])
    if not items:
        items = [part for part in (env("GLOBAL_LIMITS") or "").split(",") if part.strip()]
    limits: dict[str, Any] = {}
    for item in items:
        tag, sep, raw = item.partition("=")
        tag, raw = tag.strip(), raw.strip()
        try:
            number: Any = int(raw)
        except ValueError:
            number = raw
        if not sep or not tag or isinstance(number, str):
            raise UsageError(
                f"--global-limit must be TAG=N with N a positive integer (db=4), got {item!r}"
            )
        if tag in limits:
            raise UsageError(f"--global-limit {tag!r} is given twice")
        limits[tag] = number
    try:
        return check_global_limits(limits, "--global-limit")
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from None


def _scheduler(controller: Any, module: Any, spec: str) -> tuple[Any, list[str]]:
    """A Scheduler with the module's schedules, or ``(None, [])`` if it declares none."""
    apply = module_schedules(module)
    if apply is None:
        return None, []
    from chongming_task.schedule import Scheduler

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


def _expose_metrics(controller: Any, scheduler: Any, port: int, host: str, worker: Any) -> Any:
    """Serve ``/metrics`` and ``/healthz`` for this worker (the ``prometheus`` extra)."""
    from chongming_task.observability import expose_metrics

    try:
        return expose_metrics(
            controller, port, host=host, scheduler=scheduler, health=worker.health
        )
    except ConfigurationError as exc:
        raise CommandFailed(str(exc)) from exc


def cmd_worker(args: argparse.Namespace, session: Session) -> int:
    max_parallel = _max_parallel(args)
    global_limits = _global_limits(args)
    metrics_port = _metrics_port(args)
    metrics_host = args.metrics_host or env("METRICS_HOST", "127.0.0.1") or "127.0.0.1"
    if args.shutdown_timeout <= 0 or args.poll_interval <= 0:
        raise UsageError("--shutdown-timeout and --poll-interval must be > 0 seconds")
    if args.drain_timeout < 0:
        raise UsageError(f"--drain-timeout must be >= 0 seconds, got {args.drain_timeout:g}")
    if args.lease_ttl is not None and args.lease_ttl <= 0:
        raise UsageError(f"--lease-ttl must be > 0 seconds, got {args.lease_ttl:g}")
    if args.keep_finished < 0:
        raise UsageError(
            f"--keep-finished must be a number of tasks >= 0, got {args.keep_finished}"
        )
    executor = _choice(args, "executor", EXECUTORS, "thread")
    level = _choice(args, "log-level", LOG_LEVELS, "info")
    fmt = _choice(args, "log-format", LOG_FORMATS, "text")
    retention = _retention(args)
    spec = args.tasks or env("TASKS") or ""
    module = load_task_module(spec)
    with worker_logging(session.output, level=level, fmt=fmt):
        return _serve(
            args,
            session,
            module=module,
            spec=spec,
            max_parallel=max_parallel,
            executor=executor,
            retention=retention,
            metrics=(metrics_port, metrics_host),
            global_limits=global_limits,
        )


def _serve(  # noqa: C901 (the worker's start-up sequence, one step per option; splitting it hides the order)
    args: argparse.Namespace,
    session: Session,
    *,
    module: Any,
    spec: str,
    max_parallel: int,
    executor: str,
    retention: Any,
    metrics: tuple[int | None, str],
    global_limits: dict[str, int],
) -> int:
    from chongming_task.stores._queue_health import split_waiting
    from chongming_task.worker import Worker

    store = session.open_store(create=True)
    controller = node_controller(
        session,
        store,
        max_parallel=max_parallel,
        lease_ttl=args.lease_ttl,
        keep_finished=args.keep_finished,
        executor=_executor(executor),
    )
    names = register_tasks(controller, module, spec)
    scheduler, schedule_names = _scheduler(controller, module, spec)
    tracing = _tracing(controller)
    if tracing is not None:
        session.on_close(tracing)
    worker = Worker(
        controller,
        max_parallel=max_parallel,
        poll_interval=args.poll_interval,
        scheduler=scheduler,
        global_limits=global_limits,
        drain_timeout=args.drain_timeout,
        requeue_on_shutdown=args.requeue_on_shutdown,
    )
    endpoint = None
    metrics_port, metrics_host = metrics
    if metrics_port is not None:  # before the banner: a busy port is the only line
        endpoint = session.on_close(
            _expose_metrics(controller, scheduler, metrics_port, metrics_host, worker)
        )
    owned = session.options.owned_buckets
    log.info(
        "worker %s on %s: tasks %s; max_parallel %d; executor %s; buckets %s of %d",
        controller.owner,
        session.options.shown_db,
        ", ".join(names),
        max_parallel,
        executor,
        "all" if owned is None else format_buckets(owned),
        session.options.num_buckets,
    )
    if global_limits:
        shown = ", ".join(f"{tag}={n}" for tag, n in sorted(global_limits.items()))
        log.info("global limits (across workers): %s", shown)
    if schedule_names:
        log.info("schedules: %s", ", ".join(schedule_names))
    if endpoint is not None:
        log.info("metrics: %s (health: %s)", endpoint.url, endpoint.health_url)
    pruner = None
    if retention is not None:
        pruner = session.on_close(_start_pruner(controller, retention, args))
    received: list[str] = []

    def on_signal(name: str) -> None:
        received.append(name)
        if len(received) == 1:
            worker.request_shutdown()  # drain
        else:
            worker.stop_now()  # a second signal: stop what is left at once

    with on_shutdown_signals(on_signal):
        report = worker.start()
        waiting, adoptable = split_waiting(controller.store, report.adoptable)
        log.info(
            "reconciled: %s lost, %s adoptable (resubmit to run), %s skipped%s",
            _ids(report.lost),
            _ids(adoptable),
            _ids(report.skipped),
            f"; {len(waiting)} queued task(s) waiting for a worker" if waiting else "",
        )
        log.info("ready; stop with Ctrl-C or SIGTERM")
        try:
            while not worker.wait(0.5):
                pass
        except KeyboardInterrupt:  # a signal raced the handler installation
            received.append("SIGINT")
        signal_name = received[0] if received else "shutdown"
        if pruner is not None:
            pruner.close()
        held = sum(1 for run in controller.runs() if not run.done)
        log.info(
            "%s: shutting down; claiming nothing more; %d task(s) running may finish "
            "for up to %gs, then what is left is stopped (deadline %gs; a second signal "
            "skips the drain)",
            signal_name,
            held,
            args.drain_timeout,
            args.shutdown_timeout,
        )
        shutdown = worker.shutdown(
            reason=f"worker shutdown ({signal_name})", timeout=args.shutdown_timeout
        )
    _report(shutdown, args.shutdown_timeout)
    (log.info if shutdown.clean else log.warning)(
        "worker %s stopped: took %d task(s); at shutdown: finished %d, handed back %d, "
        "stopped %d, lost %d",
        controller.owner,
        worker.claimed,
        len(shutdown.tasks)
        - len(shutdown.handed_back)
        - len(shutdown.stopped)
        - len(shutdown.unfinished),
        len(shutdown.handed_back),
        len(shutdown.stopped),
        len(shutdown.unfinished),
    )
    if shutdown.handed_back:
        log.info("handed back to the queue: %s", _named(shutdown.handed_back))
    if shutdown.stopped:
        log.warning(
            "stopped by the shutdown, not run again by itself (not idempotent, or not "
            "enqueued through the queue): %s",
            _named(shutdown.stopped),
        )
    return ExitCode.OK if shutdown.clean else ExitCode.FAILED
