"""`numerate numgen ...`: run, score, report, calibrate, prompts.

Imports stay inside the commands: `numerate --help` must not load numpy or torch.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from numerate.cli.common import (
    DB_OPTION,
    FORMAT_OPTION,
    RUN_HELP,
    check_format,
    check_output,
    fail,
    open_reader,
    path_option,
    results_db,
    show,
    warn,
    write_output,
)
from numerate.cli.process import PROCESS
from numerate.cli.running import RunKind, run_flow, shown_after_a_signal
from numerate.kernel.errors import EXIT_FAILED_FOR_NOW, ConfigError, NumerateError

if TYPE_CHECKING:
    from numerate.store.queries import Source

app = typer.Typer(
    name="numgen",
    help="NumGen: number sense of text-to-image models (generate, count, score).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

OPTION_OF = {
    "generator": "--generator", "detector": "--detector", "images_dir": "--images-dir",
    "prompts.per_number": "--count", "prompts.objects": "--object", "prompts.seed": "--seed",
    "generation.steps": "--steps", "generation.guidance": "--guidance",
    "generation.height": "--size", "generation.width": "--size",
    "generation.device": "--device", "generation.dtype": "--dtype",
    "generation.batch_size": "--batch-size", "generation.size": "--size",
}  # fmt: skip
"""The option of `numgen run` that sets each NumGen config field."""


def _options_given(values: dict[str, Any], **sections: dict[str, Any]) -> dict[str, str]:
    """{config field: option} for the options given on the command line (values not None;
    `sections`' keys prefixed by their name), so that an error names it as the user wrote it."""
    values = {**values, **{f"{name}.{k}": v for name, d in sections.items() for k, v in d.items()}}
    return {f: option for f, option in OPTION_OF.items() if values.get(f) is not None}


def _load_yaml(path: Path) -> dict[str, Any]:
    from numerate.config.sweep import load_yaml, refuse_the_other_kind
    from numerate.kernel.errors import what_it_is

    data = load_yaml(path, "numgen config")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {what_it_is(data)}")
    refuse_the_other_kind(data, f"numgen config {path}", "numgen")
    return data


def _before_the_run(config: Any, db: str, dispatch: str, recount: bool) -> None:
    """What `_run_flow` checks before the run begins: Prefect's server up, the deployments
    the run needs and the database."""
    from numerate.cli.common import notes_to_stderr
    from numerate.server.lifecycle import connect
    from numerate.store.reader import database_file_problem

    server = connect()  # before Prefect's import: else it started a server of its own
    try:
        from numerate.flows.numgen import counting_deployments, deployments_needed
        from numerate.kernel.progress import reporting_to
        from numerate.store import Store
        from numerate.tasks.dispatch import Dispatch, require_deployed

        problem = database_file_problem(db, writing=True)  # refused before the wait
        if problem:
            raise ConfigError(f"cannot open results database {db}: {problem}")
        server.wait()  # a missing deployment: said before the database is made
        needed = (counting_deployments if recount else deployments_needed)(config)
        for note in asyncio.run(require_deployed(needed, cast(Dispatch, dispatch))):
            warn(note)
        with reporting_to(notes_to_stderr()):  # a wait for the file says so in one line
            Store.open(db)  # one of another program, or newer: refused before any image
    except BaseException:
        server.abandon()  # a server started for a run that does not run stops, as `run`'s
        raise


def _run_flow(
    config: Any, db: str, dispatch: str, recount: str | None = None, images_dir: str | None = None
) -> tuple[Any, NumerateError | None]:
    """Run a NumGen run of `config` (or, `recount`: count that run's images with its
    counters) after every check; returns the flow's result, and the RunFailed of a run that
    ended degraded (stored all the same: the caller shows it, then leaves with the error).
    `images_dir`: the folder `--images-dir` gave, if it did (a problem with it names it)."""
    from numerate.endpoints.images import check_hosted
    from numerate.kernel.files import check_writable_folder
    from numerate.numgen.batches import check_folders

    config.check_models(generator=not recount)  # a recount makes no image
    check_hosted(config, generator=not recount)
    if config.needs_images:  # before the database is made
        check_writable_folder(OPTION_OF["images_dir"] if images_dir else "images_dir",
                              config.images_dir)  # fmt: skip
        check_folders(config)  # no link where the run writes below it
    # before Prefect is imported: imported earlier, it did not see the server the command
    # found (numerate's background server) and started a temporary one of its own
    _before_the_run(config, db, dispatch, bool(recount))
    from numerate.flows.numgen import numgen, numgen_recount
    from numerate.grading.verdict import RunFailed
    from numerate.tasks.dispatch import Dispatch

    way = cast(Dispatch, dispatch)
    own = config.for_counter(config.detector_label) if recount else config
    settings = own.model_dump(mode="json")
    flow: Callable[[], Coroutine[Any, Any, Any]] = (  # one run, or a list of recounts
        (lambda: numgen_recount(recount, config.detector, config.detection, db, way))
        if recount else (lambda: numgen(config, db, way))
    )  # fmt: skip
    try:
        result = run_flow(
            NUMGEN,
            db,
            f"numgen {_short(config.generator)} / {_short(config.detector_label)}",
            flow=flow,
            ended_since=lambda store, since: store.numgen_ended_since(settings, since),
            run_id_of=lambda result: str((result[0] if recount else result)["run_id"]),
        )  # fmt: skip  (a failing generator's tracebacks were printed per task)
        return result, None
    except RunFailed as failed:
        if failed.result is None:
            raise  # a generator or detector failing: exit 3
        return failed.result, failed
    except (NumerateError, ValueError, typer.Exit):
        raise  # bad input: exit 2; a stop
    except Exception as error:
        fail(f"NumGen run failed: {type(error).__name__}: {error}", code=EXIT_FAILED_FOR_NOW)


def _short(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1][:24]


NUMGEN = RunKind(
    name="NumGen run",
    report="numerate numgen report",
    kept="the images made so far are kept; run the same command again to continue without "
    "making them twice",
    not_started="the NumGen run had not started; nothing was stored",
)

CONFIG_OPTION = path_option("NumGen config (YAML); options win.", "--config", "-c")


IMAGES_DIR_HELP = "Folder for images (default: results/numgen, under the current folder)."


@app.command()
def run(
    generator: Annotated[
        str | None,
        typer.Option(
            help="diffusers model id or path, synthetic (default), callable:module:function, "
            "api:<model id> (an Images API: generation.base_url), random or weber."
        ),
    ] = None,
    detector: Annotated[
        list[str] | None,
        typer.Option(
            help="Counter: Grounding DINO model id or path, blobs, or vlm:<model id>; "
            "repeatable, each further one counts the images again in a linked run (default: "
            "blobs for synthetic, IDEA-Research/grounding-dino-tiny otherwise)."
        ),
    ] = None,
    count: Annotated[int | None, typer.Option(help="Prompts per number (default 10).")] = None,
    objects: Annotated[
        list[str] | None, typer.Option("--object", help="Object to ask for (repeatable).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of prompts and images.")] = None,
    config: Annotated[Path | None, CONFIG_OPTION] = None,
    db: Annotated[str | None, DB_OPTION] = None,
    images_dir: Annotated[str | None, typer.Option(help=IMAGES_DIR_HELP)] = None,
    steps: Annotated[int | None, typer.Option(help="Denoising steps.")] = None,
    guidance: Annotated[float | None, typer.Option(help="Guidance scale.")] = None,
    size: Annotated[int | None, typer.Option(help="Image width and height in pixels.")] = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu, cuda, cuda:N or mps.")] = None,
    dtype: Annotated[
        str | None, typer.Option(help="auto, float32, float16 or bfloat16 (generator).")
    ] = None,
    batch_size: Annotated[
        int | None, typer.Option(help="Images per generator call (default: fit the GPU).")
    ] = None,
    dispatch: Annotated[
        str, typer.Option(help="auto, local or deployments (the gpu work pool).")
    ] = "auto",
    output: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
) -> None:
    """Generate images for "An image with {n} {object}", count the objects, score, store."""
    from numerate.numgen.config import parse_numgen_config, with_options

    PROCESS.if_stopped_say(NUMGEN.not_started)
    db = results_db(db)
    generation = {"steps": steps, "guidance": guidance, "height": size, "width": size,
                  "device": device, "dtype": dtype, "batch_size": batch_size}  # fmt: skip
    prompts = {"per_number": count, "objects": objects, "seed": seed}
    try:
        from numerate.numgen.generation import check_size

        check_format(output, ("table", "json"))
        check_dispatch(dispatch)
        check_size(size)
        data = _load_yaml(config) if config else {}
        settings = with_options(data, generator, detector, prompts, generation, images_dir)
        top = {"generator": generator, "detector": detector, "images_dir": images_dir}
        given = _options_given(top, prompts=prompts, generation=generation)
        numgen_config = parse_numgen_config(settings, given)
        result, degraded = _run_flow(numgen_config, db, dispatch, images_dir=images_dir)
    except (NumerateError, ValueError) as error:  # ValueError: a model id, device or file
        fail(error)  # the backends refuse
    with shown_after_a_signal(NUMGEN, str(result["run_id"])):
        if output == "json":
            typer.echo(json.dumps(result, indent=2))
        else:
            _show_run(numgen_config, result, db)
    if degraded is not None:  # stored and shown: then why it is degraded, exit 3
        fail(degraded)


def check_dispatch(dispatch: str) -> None:
    """`--dispatch` is one of auto, local or deployments."""
    if dispatch not in ("auto", "local", "deployments"):
        raise ConfigError(f"--dispatch {dispatch!r}: choose auto, local or deployments")
    from numerate.server.lifecycle import mode

    if dispatch == "deployments" and mode() == "temporary":  # said after 7 s of its start
        raise ConfigError(
            "--dispatch deployments: NUMERATE_SERVER=temporary runs this command on a Prefect "
            "server of its own, which no worker polls; set PREFECT_API_URL to the server "
            "`numerate deploy` used, or use --dispatch local"
        )


def _show_run(numgen_config: Any, result: dict[str, Any], db: str) -> None:
    """A NumGen run as stored, then each further counter's run and how they agree."""
    from numerate.results.numgen import recounts_text, run_text
    from numerate.store import Store

    store = Store.open(db)
    show(run_text(store, result, numgen_config.generator, numgen_config.detector_label))
    show(recounts_text(store, result.get("recounts", [])))


@app.command()
def calibrate(
    detector: Annotated[str, typer.Option(help="Grounding DINO id or path, blobs, vlm:<id>.")],
    count: Annotated[int, typer.Option(help="Images per number.")] = 10,
    config: Annotated[Path | None, CONFIG_OPTION] = None,
    db: Annotated[str | None, DB_OPTION] = None,
    images_dir: Annotated[str | None, typer.Option(help=IMAGES_DIR_HELP)] = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu, cuda, cuda:N or mps.")] = None,
    dispatch: Annotated[str, typer.Option(help="auto, local or deployments.")] = "auto",
) -> None:
    """Measure a detector on synthetic images of known count: its accuracy per number (the
    config's `detection` section sets it)."""
    from numerate.numgen.config import calibration_config

    PROCESS.if_stopped_say("the calibration had not started; nothing was stored")
    db = results_db(db)
    try:
        extra: dict[str, Any] = {"images_dir": images_dir} if images_dir is not None else {}
        if device:
            extra["generation"] = {"device": device}
        if config:  # its counter's settings (a vlm: counter's endpoint)
            extra["detection"] = _load_yaml(config).get("detection") or {}
        check_dispatch(dispatch)
        given = ("prompts.per_number", "detector", "images_dir", "generation.device")
        options = {field: OPTION_OF[field] for field in given}  # those calibrate has
        numgen_config = calibration_config(detector, count, options=options, **extra)
        result, degraded = _run_flow(numgen_config, db, dispatch, images_dir=images_dir)
    except (NumerateError, ValueError) as error:
        fail(error)
        return
    from numerate.results.numgen import uncounted_line
    from numerate.results.report import render
    from numerate.store import Store, queries

    with shown_after_a_signal(NUMGEN, str(result["run_id"])):
        frame = queries.numgen_targets(Store.open(db), str(result["run_id"]))
        title = f"detector {detector}: accuracy per number"
        typer.echo(render(frame, "table", title=title), nl=False)
    typer.echo(f"overall: {result['accuracy']:.3f} over {result['n']} images")
    typer.echo(uncounted_line(result), nl=False)
    if degraded is not None:
        fail(degraded)


@app.command()
def recount(
    run_id: Annotated[str, typer.Argument(help=f"The run to count again. {RUN_HELP}")],
    detector: Annotated[
        list[str],
        typer.Option(
            help="Counter: Grounding DINO model id or path, blobs, or vlm:<model id> (repeatable)."
        ),
    ],
    config: Annotated[Path | None, CONFIG_OPTION] = None,
    db: Annotated[str | None, DB_OPTION] = None,
    dispatch: Annotated[str, typer.Option(help="auto, local or deployments.")] = "auto",
) -> None:
    """Count a stored run's images again with other counters: a new run linked to it per
    counter, no image made; shows each one's metrics and its agreement with the run. The
    config's `detection` section sets the counters (a vlm: counter's base_url)."""
    from pydantic import ValidationError

    from numerate.kernel.errors import describe_validation_error
    from numerate.numgen.config import recount_settings
    from numerate.numgen.detection import DetectionSettings
    from numerate.results.numgen import one_run
    from numerate.store import queries

    PROCESS.if_stopped_say("the recount had not started; nothing was stored")
    db = results_db(db)
    try:
        check_dispatch(dispatch)
        data = _load_yaml(config) if config else {}
        with open_reader(db) as reader:
            source = one_run(reader, run_id, "RUN")
            stored = queries.numgen_run_config(reader, source)
        detection = DetectionSettings.model_validate(data.get("detection") or {})
        numgen_config = recount_settings(source, stored, detector, detection)
        results, degraded = _run_flow(numgen_config, db, dispatch, recount=source)
    except ValidationError as error:
        fail(describe_validation_error(error, f"numgen config {config}, detection", yaml=True))
        return
    except (NumerateError, ValueError) as error:
        fail(error)
        return
    from numerate.results.numgen import recounts_text
    from numerate.store import Store

    with shown_after_a_signal(NUMGEN, str(results[0]["run_id"])):
        show(recounts_text(Store.open(db), results))
    if degraded is not None:
        fail(degraded)


@app.command()
def score(
    responses: Annotated[
        Path,
        path_option("CSV with columns target,generated."),
    ],
    output: Annotated[str, typer.Option("--format", help="json or table.")] = "table",
    heatmap: Annotated[
        Path | None,
        path_option("Also draw the confusion matrix to this PNG."),
    ] = None,
) -> None:
    """Score (target, generated) pairs from any source: every NumGen metric."""
    from numerate.results.numgen import metrics_frame

    try:
        check_format(output, ("json", "table"))
        check_output("--heatmap", heatmap, (".png",))
        from numerate.numgen.responses import read_responses

        pairs = read_responses(responses)
        from numerate.numgen.metrics import counted_matrix
        from numerate.numgen.metrics import score as score_matrix

        cm = counted_matrix(pairs)  # rows 1..10, or to the largest target
    except NumerateError as error:
        fail(error)
        return
    scores = score_matrix(cm)
    if heatmap:
        from numerate.numgen.heatmap import render_heatmap

        image = render_heatmap(cm, f"{responses.name} (n = {cm.n})")
        write_output(heatmap, lambda partial: image.save(partial, format="PNG"))
        typer.echo(f"heatmap: {heatmap}", err=True)  # as `numgen report --heatmap` says it
    if output == "json":
        typer.echo(json.dumps(scores.as_dict(), indent=2))
        return
    from numerate.results.report import render

    show(render(metrics_frame(scores.as_row()), "table", title=str(responses)))


@app.command()
def report(
    db: Annotated[str | None, DB_OPTION] = None,
    output: Annotated[str, FORMAT_OPTION] = "table",
    heatmap: Annotated[
        Path | None,
        path_option("Draw a run's confusion matrix to this PNG."),
    ] = None,
    run_id: Annotated[
        str | None, typer.Option("--run", help=f"Run for --heatmap. {RUN_HELP} Default: latest.")
    ] = None,
) -> None:
    """The NumGen leaderboard (Accuracy, MWE, Counting Level, Weber's Law), latest run of each
    generator and detector."""
    from numerate.results.numgen import (
        LEADERBOARD_COLUMNS,
        agreement_text,
        calibration_note,
        calibrations_only,
    )
    from numerate.results.report import render
    from numerate.store import queries

    try:
        fmt = check_format(output)
        check_output("--heatmap", heatmap, (".png",))
        if run_id is not None and not run_id.strip():
            raise ConfigError("--run '': give a NumGen run id (or leave it out for the latest)")
        if run_id is not None and heatmap is None:
            raise ConfigError(f"--run {run_id}: it chooses the run for --heatmap; give --heatmap")
        with open_reader(db) as reader:
            frame = queries.numgen_leaderboard(reader)
            if frame.height == 0:
                raise ConfigError(f"{reader.path} holds no finished NumGen benchmark run "
                                  f"yet{calibrations_only(reader)}")  # fmt: skip
            if heatmap:
                _draw_run_heatmap(reader, run_id, heatmap)
            # the reference's labels for a reader; a program gets the view's columns, as in
            # every other JSON and CSV numerate writes
            shown = frame.rename(LEADERBOARD_COLUMNS) if fmt in ("table", "markdown") else frame
            show(render(shown, fmt, title="NumGen leaderboard"))
            if fmt in ("table", "markdown"):
                for detector in frame["detector"].unique().sort().to_list():
                    if detector not in ("none", "blobs"):
                        typer.echo(calibration_note(reader, detector))
                show(agreement_text(reader, fmt))
    except NumerateError as error:
        fail(error)


def _draw_run_heatmap(store: Source, run_id: str | None, path: Path) -> None:
    from numerate.numgen.heatmap import render_heatmap
    from numerate.results.numgen import run_confusion

    found, generator, detector, cm = run_confusion(store, run_id)
    image = render_heatmap(cm, f"{generator} / {detector}: {found} (n = {cm.n})")
    write_output(path, lambda partial: image.save(partial, format="PNG"))
    typer.echo(f"heatmap of run {found}: {path}", err=True)


@app.command()
def prompts(
    count: Annotated[int, typer.Option(help="Prompts per number.")] = 10,
    objects: Annotated[
        list[str] | None, typer.Option("--object", help="Object (repeatable).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed.")] = 0,
    output: Annotated[str, typer.Option("--format", help="json, jsonl or txt.")] = "jsonl",
    out: Annotated[
        Path | None,
        path_option("File to write (default: stdout)."),
    ] = None,
) -> None:
    """Export the prompts ("An image with 7 apples") as JSON, JSON Lines or text."""
    from numerate.numgen.prompts import ExportFormat, iter_prompts, prompt_chunks, prompt_count
    from numerate.numgen.prompts import spec_of_options as spec_of

    options = {f.removeprefix("prompts."): o for f, o in OPTION_OF.items() if "prompts." in f}
    try:
        check_format(output, ("json", "jsonl", "txt"))
        check_output("--out", out)
        spec = spec_of({"per_number": count, "seed": seed, "objects": objects}, options)
    except NumerateError as error:
        fail(error)
        return
    chunks = prompt_chunks(iter_prompts(spec), cast(ExportFormat, output))  # a prompt at a time
    if out:
        write_output(out, lambda file: file.writelines(c.encode() for c in chunks))
        typer.echo(f"wrote {prompt_count(spec)} prompts to {out}", err=True)
    else:
        sys.stdout.writelines(chunks)
