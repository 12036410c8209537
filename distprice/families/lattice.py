"""The lattice family on a cluster: a portfolio job cut into chunks of rows, and what a worker runs of it.

A portfolio the client holds is validated there (:func:`read`) and cut into runs of consecutive rows of equal
cost (:mod:`distprice.planner`), each priced by one ``price_<engine>_<precision>`` task (e.g.
``price_gpu_flat_fp64``) carrying its instruments and the plan the inspector made for the workers' device, under
every scenario (or a block of them); the client makes each run's piece of the priced table as it comes, in
portfolio order (:func:`split`, :func:`tables`). ``auto`` chooses the engines once for the whole job
(:func:`job_plan`), so that each row's engine, and with it the last bits of its prices, is the same however
many workers share the job.

A big Parquet portfolio (:data:`READ_ON_WORKERS_ROWS` rows or more) is read by the workers instead, in two stages
(:func:`split_file`): ``read-chunk`` tasks each read and check a slice where it lies (:func:`read_chunk`) and the
client gets what it needs of every slice (:func:`inspect_chunk`), checks what only the whole file shows
(:func:`file_problems`: ids held twice, exercise schedule lines no row takes), then each slice is priced where it
lies (:func:`price_read_chunk`, or :func:`write_read_chunk` into a folder of parts). The client holds the plan and
one priced slice at a time, not the portfolio. Tasks carry their inputs as plain values (instruments with their
geometry, the market, the plan), so a lost worker's tasks can run elsewhere.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..choices import AUTO
from ..errors import InvalidInputError, Problem
from ..execute import choose_plan, fixed_plan, price_parts
from ..inspector import CostModel, Part, Plan
from ..job import (
    Job,
    JobOptions,
    Risk,
    Tally,
    check_columns,
    check_predicted,
    echoed,
    exercise_lines,
    exercise_schedule,
    exercise_table,
    model_table,
    payment_lines,
    payment_tables,
    payments,
    prepare_job,
    read_risk,
)
from ..join import template
from ..lattice.dated import unmatched_lines
from ..lattice.geometry import node_steps
from ..lattice.instruments import DUPLICATE_ID, Instruments, duplicated_ids, id_hashes, prepare
from ..lattice.quotes import Quotes
from ..planner import FileSlice, chunk_count, shared_gpu_slices, spans, table_slices, task_count, work_grid
from ..precision import precision_name
from ..scenarios import Market
from ..tables import (
    FOLDER,
    LABEL_COLUMNS,
    parquet_files,
    part_name,
    schema_names,
    table_format,
    text_columns,
    to_pandas,
    write_part,
)
from .work import Chunk, Family, Metered, Outline, Parts, Stages, Work, Workers, chunk_progress

READ_ON_WORKERS_ROWS = 1_000_000
"""Parquet portfolios of at least this many prices (rows × scenarios) are read by the workers, not the client."""
TASK = "price_"
"""The beginning of a pricing task's name."""


@dataclass(frozen=True)
class Portfolio:
    """A validated portfolio job, the engine it asks for, its name on the dashboard and the most seconds of
    pricing it may be predicted to take (None: no limit)."""

    job: Job
    engine: str
    name: str
    max_seconds: float | None = None


@dataclass(frozen=True)
class BigFile:
    """A big Parquet portfolio (a file or a folder of parts) for the workers to read: its parts with the sizes of
    their row groups, its rows, the job's checked options and market (read here, shipped to the workers), and the
    folder being built that the workers write the priced table into (None: the client gets it)."""

    path: str
    groups: list[tuple[str, list[int]]]
    rows: int
    options: JobOptions
    market: Market
    folder: str | None


def read(
    portfolio, options: JobOptions, *, folder: str | None = None, read_on_workers_rows: int | None = None
) -> Portfolio | BigFile:
    """Reads and checks a portfolio (a DataFrame or a CSV/Parquet path) under checked ``options``
    (:func:`~distprice.job.prepare_job`). A Parquet one of at least ``read_on_workers_rows`` prices (rows × the
    job's scenarios; None: :data:`READ_ON_WORKERS_ROWS`) is left to the workers, only its columns checked here;
    they write the priced table as parts of ``folder`` (a folder being built), when given."""
    parts = _parquet_parts(portfolio)
    least = READ_ON_WORKERS_ROWS if read_on_workers_rows is None else read_on_workers_rows
    market = options.market() if parts is not None else None
    if parts is not None and sum(m.num_rows for _, m in parts) * len(market.curve_sets) >= least:
        groups = [(part, [m.row_group(g).num_rows for g in range(m.num_row_groups)]) for part, m in parts]
        rows = sum(sum(sizes) for _, sizes in groups)
        check_columns(schema_names(m.schema for _, m in parts), rows, options)
        return BigFile(str(portfolio), groups, rows, options, market, folder)
    job = prepare_job(portfolio, options)
    name = f"a table of {len(job.table)} rows" if isinstance(portfolio, pd.DataFrame) else str(portfolio)
    return Portfolio(job, options.engine, name, options.max_seconds)


def _parquet_parts(portfolio) -> list | None:
    """The parts of a Parquet portfolio (a file or a folder of parts) with their metadata; None for a table held
    here, another format, or what is not a Parquet table (the client's reading says why)."""
    if isinstance(portfolio, pd.DataFrame) or table_format(portfolio) not in ("parquet", FOLDER):
        return None
    import pyarrow.parquet as pq

    try:
        return [(part, pq.ParquetFile(part).metadata) for part in parquet_files(portfolio)]
    except (OSError, ValueError):
        return None


def split(portfolio: Portfolio | BigFile, workers: Workers) -> Work | Stages:
    """A job's rows in runs of consecutive rows of equal cost, as many as its predicted time pays for
    (:func:`~distprice.planner.task_count`), each planned for the workers' device and priced under every scenario
    (for the ``full`` scenario table, under each block of scenarios in turn); a big file: :func:`split_file`.
    The work's result is the job's :class:`~distprice.job.Tally` and a generator of the priced table's pieces,
    in order, each made as soon as its chunk's prices come (the tally is complete once the generator is
    exhausted)."""
    if isinstance(portfolio, BigFile):
        return split_file(portfolio, workers)
    job = portfolio.job
    instruments = job.instruments()
    geometry = instruments.geometry
    sets = job.market.curve_sets
    tally = Tally(len(job.table), len(sets))
    if not len(instruments):
        empty = np.zeros((len(sets), 0))
        table = job.table_of(tally.add(job.priced_columns(empty, empty, np.empty(0), measured=job.measure())))
        return Work([], lambda results: (tally, iter([table])), "pricing")
    model = CostModel.from_json(workers.model)
    seconds = predicted_seconds(geometry.width, geometry.height, model, workers.gpu) * len(sets)
    tasks = task_count(seconds, workers.count, workers.chunks_per_worker, workers.task_seconds)
    row_chunks, blocks = work_grid(len(instruments), len(sets), tasks, job.by_scenario)
    valid = job.prepared.valid
    cost = np.zeros(len(valid))
    cost[valid] = node_steps(geometry.width, geometry.height)
    runs = spans(cost, row_chunks)
    before = np.concatenate([[0], np.cumsum(valid)])  # valid rows before each row
    firsts = [range(int(before[r.start]), int(before[r.stop])) for r in runs]  # each run's valid rows
    pieces = [instruments.take(np.arange(f.start, f.stop)) for f in firsts]
    quotes = job.valid_quotes()
    chosen = job_plan(instruments, portfolio.engine, job.real, model, workers) if len(pieces) > 1 else None
    plans = [
        choose_plan(
            piece,
            portfolio.engine,
            job.real,
            model=model,
            gpu=workers.gpu,
            gpu_processes=workers.gpu_processes,
            only=chosen,
        )
        for piece in pieces
    ]
    sharing = max(1, min(workers.count, len(pieces)))  # the workers that share the job's chunks
    predicted = sum(p.seconds for p in plans) * len(sets) / workers.at_once(len(pieces))
    check_predicted(predicted, portfolio.max_seconds, f"on {sharing} worker{'s' * (sharing != 1)}", model)
    figures = dict(
        name=portfolio.name,
        rows=len(job.table),
        invalid=len(job.table) - len(instruments),
        scenarios=len(sets),
        chunks=len(pieces) * len(blocks),
        node_steps=instruments.node_steps * len(sets),
        predicted_seconds=predicted,
        cost_model=model.source,
    )
    names = [
        [f"{task_name([p.engine for p in plan.parts], job.real)}-{b}-{i}" for b in range(len(blocks))]
        for i, plan in enumerate(plans)
    ]
    outline = Outline(
        joined(plans, firsts),
        [np.arange(f.start, f.stop) for f in firsts],
        names,
        [plan.seconds * len(sets) / workers.pricing_share for plan in plans],
    )
    priced = [
        Chunk(
            names[i][b],
            price_chunk,
            (
                piece,
                sets[block.start : block.stop],
                plan.parts,
                job.real,
                job.risk,
                None if quotes is None else quotes.take(np.arange(f.start, f.stop)),
            ),
            priority=-(b * len(pieces) + i),
            workers=workers.home(b * len(pieces) + i, len(pieces) * len(blocks)),
        )
        for b, block in enumerate(blocks)
        for i, (piece, plan, f) in enumerate(zip(pieces, plans, firsts))
    ]
    return Work(
        priced, lambda results: (tally, tables(job, results, runs, blocks, tally)), "pricing", figures, outline=outline
    )


def job_plan(instruments: Instruments, engine: str, real, model: CostModel, workers: Workers) -> str | None:
    """The candidate ``auto`` plans every chunk of a job with: the one the inspector chooses for the whole
    job, so that a row's engine, and so its prices' last bits, do not depend on the chunk the workers' count
    puts it in (a named engine: None)."""
    if engine != AUTO:
        return None
    return choose_plan(instruments, engine, real, model, workers.gpu, workers.gpu_processes).chosen


def joined(plans: list[Plan], firsts: list[range]) -> Plan:
    """The plans of a job's chunks of rows (``firsts``: each chunk's valid rows) as one plan of its valid rows,
    a part per engine; its seconds are the chunks' plans' together, in one process."""
    rows: defaultdict[str, list[np.ndarray]] = defaultdict(list)
    seconds: defaultdict[str, float] = defaultdict(float)
    for plan, first in zip(plans, firsts):
        for part in plan.parts:
            rows[part.engine].append(np.asarray(part.rows) + first.start)
            seconds[part.engine] += part.seconds
    parts = [Part(e, np.sort(np.concatenate(r)), seconds[e], "the chunks' plans joined") for e, r in rows.items()]
    return Plan(parts, sum(p.seconds for p in plans), next((p.model for p in plans if p.model is not None), None))


LATTICE = Family(read, split, counted=(TASK,), metered=(TASK,))
"""Portfolios of bond options, callable and puttable bonds on Hull-White trees."""


def predicted_seconds(width: np.ndarray, height: np.ndarray, model: CostModel, gpu: bool) -> float:
    """A quick prediction of pricing trees of these widths and heights under one curve set on one worker: the
    flat kernel's on a GPU, the CPU engine's without one (the plan of each chunk says more)."""
    return (model.flat if gpu else model.cpu)(np.asarray(width), np.asarray(height))[0]


def tables(job: Job, results, runs: list[slice], blocks: list[range], tally: Tally):
    """The priced table's pieces, in order, from each chunk's (bond, option, engines, measures), which come
    run by run for each block of scenarios: a piece per run (its rows, each under every scenario), or, for the
    ``full`` scenario table, a piece per run and scenario once a block's runs are in."""
    results = iter(results)
    for block in blocks:
        held = []
        for run, (bond, option, engines, measured) in zip(runs, results):
            made = job.priced_columns(bond, option, engines, first_set=block.start, measured=measured, rows=run)
            if job.by_scenario:
                held.append(tally.add(made))
            else:
                yield job.table_of(tally.add(made))
        for s in range(len(block) if held else 0):
            for columns in held:
                yield columns.frame(s)


def task_name(engines, real) -> str:
    """``price_<engine>[_<engine>]_<precision>``: Dask's task names keep no word holding a digit, hence the
    underscores."""
    return TASK + "_".join(e.replace("-", "_") for e in dict.fromkeys(engines)) + f"_{precision_name(real)}"


def price_chunk(
    instruments: Instruments, curve_sets, parts, real, risk: Risk | None = None, quotes: Quotes | None = None
) -> Metered:
    """Prices the ``instruments`` of a chunk as ``parts`` say: bond, option (curve sets x rows), engines, and the
    chunk's risk measures (on the first curve set, the base; None without ``risk``), metered; tells how far it
    is as it goes (:func:`~.work.chunk_progress`)."""
    tick = time.perf_counter()
    progress = chunk_progress(len(instruments) * len(curve_sets), instruments.node_steps * len(curve_sets))
    bond, option, kernel_seconds = price_parts(instruments, curve_sets, parts, real, progress)
    engines = np.empty(len(instruments), dtype=object)
    for part in parts:
        engines[part.rows] = part.engine
    seconds = time.perf_counter() - tick
    measured = None if risk is None else risk.measure(instruments, curve_sets[0], quotes, bond[0], option[0], real)
    return Metered(
        (bond, option, engines, measured),
        len(instruments) * len(curve_sets),
        instruments.node_steps * len(curve_sets),
        seconds,
        kernel_seconds,
        "+".join(dict.fromkeys(p.engine for p in parts)),
    )


# ---- a big file, read by the workers ----


FILE_PLAN = "gpu-flat"
"""What ``auto`` prices a big file's slices with on GPU workers, where the file takes several: no slice is
planned on its own, which would give a row an engine, and its prices their last bits, by the slice the workers'
count puts it in; the workers read the trees, so no plan of the whole file is made before they are priced."""


def split_file(file: BigFile, workers: Workers) -> Stages:
    """A big file's job in two stages. First ``read-chunk`` tasks each read, check and plan a slice of its rows,
    which stays where it was read, and ``inspect-chunk`` tasks send the client what it needs of each; once the
    whole file's checks pass (:func:`file_problems`), the slices are priced where they lie, in file order. The
    result is the job's :class:`~distprice.job.Tally` and a generator of the priced slices in file order (the
    tally is complete once the generator is exhausted); with a ``folder``, the tally and the :class:`Parts` of
    that folder: each slice is priced and written as a part of it as soon as it is read, while the rest are
    checked, and a slice holding ids that other slices hold is priced and written again, those rows made
    invalid."""
    options, market = file.options, file.market
    full = options.scenario_table == "full" and market.scenarios is not None
    gpus = len(workers.gpus)
    if workers.gpu and workers.gpu_processes > 1 and len(market.curve_sets) > 1 and options.risk is None:
        count = shared_gpu_slices(file.rows, gpus, workers.gpu_processes, workers.chunks_per_worker)
        slices = table_slices(file.groups, count, opening=gpus)
    else:
        count = chunk_count(file.rows, workers.count, workers.chunks_per_worker)
        slices = table_slices(file.groups, count, opening=workers.count if workers.gpu else 0)
    figures = dict(
        name=file.path, rows=file.rows, chunks=len(slices), scenarios=len(market.curve_sets), predicted_seconds=0.0
    )
    # a worker reads and checks its slices before it prices any, so that the whole file's checks end early and the
    # client joins the parts while the rest are priced: checks first, then reads, then pricing, each in file order;
    # on several GPUs that several workers share, the slices go round the GPUs, and each is priced where it is read
    n = len(slices)
    only = FILE_PLAN if options.engine == AUTO and workers.gpu and n > 1 else None
    read = [
        Chunk(
            f"read-chunk-{i}",
            read_chunk,
            (piece, market, options, workers.model, workers.gpu, workers.gpu_processes, only),
            priority=n - i,
            workers=workers.on_gpu(i),
        )
        for i, piece in enumerate(slices)
    ]
    written = []
    if file.folder is not None:
        name = task_name([options.engine], options.real)
        written = [
            Chunk(f"{name}-{i}", write_read_chunk, (r, [], file.folder, i, len(slices)), priority=-i)
            for i, r in enumerate(read)
        ]
    inspected = [Chunk(f"inspect-chunk-{i}", inspect_chunk, (r,), priority=2 * n - i) for i, r in enumerate(read)]
    summaries = yield Work(inspected, list, "reading and checking", figures, kept=(*read, *written))
    problems, duplicates = file_problems(file.path, options, summaries, slices)
    sharing = max(1, min(workers.count, len(slices)))
    predicted = sum(s["seconds"] for s in summaries) * len(market.curve_sets) / workers.at_once(len(slices))
    where = f"on {sharing} worker{'s' * (sharing != 1)}"
    model = CostModel.from_json(workers.model)
    check_predicted(predicted, options.max_seconds, where, model)
    figures = dict(
        figures,
        invalid=len({p.where for p in problems + duplicates}),
        predicted_seconds=predicted,
        cost_model=model.source,
    )
    found = [[d for d in duplicates if d.piece == i] for i in range(len(slices))]
    tally = Tally(file.rows, len(market.curve_sets))
    if file.folder is not None:

        def paths(results):
            """Each part's :class:`~distprice.join.Template` as its slice is written, in the table's order (the
            full scenario table's parts, a slice's per scenario, once all are written)."""
            held = []
            for part_tally, templates in results:
                tally.absorb(part_tally)
                if full:
                    held += templates
                else:
                    yield from templates
            yield from sorted(held, key=lambda t: t.path)

        again = [
            Chunk(w.name, write_read_chunk, (r, mine, file.folder, i, len(slices), w), again=True) if mine else w
            for i, (r, w, mine) in enumerate(zip(read, written, found))
        ]
        return Work(again, lambda tallies: (tally, Parts(paths(tallies))), "pricing and writing", figures, light=True)
    priced = [
        Chunk(f"{task_name(s['engines'] or ['none'], options.real)}-{i}", price_read_chunk, (r, mine), priority=-i)
        for i, (r, s, mine) in enumerate(zip(read, summaries, found))
    ]

    def fetched(i: int, result: tuple[Tally, list[pd.DataFrame]]) -> list[pd.DataFrame]:
        """A slice's priced tables as they come, tallied, with the portfolio's columns put back where they were
        left out (no scenarios)."""
        slice_tally, tables = result
        tally.absorb(slice_tally)
        return [with_columns(slices[i], tables[0])] if market.scenarios is None else tables

    if full:
        return Work(priced, lambda held: (tally, by_scenario(held, slices)), "pricing", figures, each=fetched)
    return Work(priced, lambda pieces: (tally, (t for (t,) in pieces)), "pricing", figures, each=fetched)


@dataclass
class ReadChunk:
    """A slice of a big file as a worker read and checked it, the plan to price it, the rows of the job's
    exercise schedule table its ids took (None without one) and the plan's predicted seconds under one curve
    set."""

    job: Job
    parts: list
    schedule_lines: np.ndarray | None = None
    seconds: float = 0.0
    payment_lines: dict | None = None
    """The rows of the coupon and principal schedule tables its ids took, by table."""


def read_slice(piece: FileSlice) -> pd.DataFrame:
    """The rows of a slice of a Parquet portfolio, indexed by their positions in the file (label columns as
    categories, as :func:`~distprice.tables.read_portfolio` reads them)."""
    import pyarrow.parquet as pq

    labels = text_columns(pq.read_schema(piece.path), LABEL_COLUMNS)
    file = pq.ParquetFile(piece.path, read_dictionary=labels or None)
    table = to_pandas(file.read_row_groups(list(piece.groups)).slice(piece.start, piece.rows))
    table.index = pd.RangeIndex(piece.first_row, piece.first_row + len(table))
    return table


def read_chunk(
    piece: FileSlice,
    market: Market,
    options: JobOptions,
    model_json: str,
    gpu: bool,
    gpu_processes: int = 1,
    only: str | None = None,
) -> ReadChunk:
    """Reads and checks a slice of a big Parquet portfolio and plans it for this cluster's workers (``gpu``,
    ``gpu_processes`` and ``only``: :func:`~distprice.execute.choose_plan`'s)."""
    table = read_slice(piece)
    schedule = exercise_table(options.exercise_schedule)
    lines = exercise_lines(options.exercise_schedule, table)
    stepped = payment_tables(options)
    stepped_lines = payment_lines(stepped, table)
    prepared = prepare(
        table,
        market.base,
        options.limits,
        as_of=options.as_of,
        curve_sets=market.curve_sets,
        exercise_schedule=exercise_schedule(schedule, table, lines),
        payments=payments(stepped, table, stepped_lines),
        models=model_table(options.models),
        first_row=piece.first_row,
        unique_ids=False,
        allow_large_rates=options.allow_large_rates,
    )
    prepared, quotes = read_risk(table, prepared, options.risk, piece.first_row)
    job = Job(table, prepared, market, options.real, options.on_invalid, options.risk, quotes, options.scenario_table)
    plan = choose_plan(
        job.instruments(),
        options.engine,
        options.real,
        model=CostModel.from_json(model_json),
        gpu=gpu,
        gpu_processes=gpu_processes,
        only=only,
    )
    return ReadChunk(job, plan.parts, lines, plan.seconds, stepped_lines)


def inspect_chunk(chunk: ReadChunk) -> dict:
    """What the client needs of a slice read by a worker: its problems, id hashes, the plan's engines and
    predicted seconds (one curve set) and the rows of the exercise schedule table its ids took."""
    ids = chunk.job.prepared.table["id"]
    return {
        "problems": chunk.job.prepared.problems,
        "id_hashes": id_hashes(ids),
        "engines": [p.engine for p in chunk.parts],
        "seconds": chunk.seconds,
        "schedule_lines": chunk.schedule_lines,
        "payment_lines": chunk.payment_lines,
    }


@dataclass(frozen=True)
class DuplicateId(Problem):
    piece: int = -1
    """The slice of the file the row is in (``position`` counts from the slice's first row)."""


def file_problems(
    path: str, options: JobOptions, summaries: list[dict], slices: list[FileSlice]
) -> tuple[list[Problem], list[DuplicateId]]:
    """The problems of a big file's rows (:func:`inspect_chunk`'s of every slice) and its rows whose id another row
    also holds; :class:`InvalidInputError` for exercise schedule lines that name no row of the file (market data of
    the whole job), and for any problem in strict mode."""
    if options.exercise_schedule is not None:  # every line must name a row
        unmatched = unmatched_lines(
            exercise_table(options.exercise_schedule), np.concatenate([s["schedule_lines"] for s in summaries])
        )
        if unmatched:
            raise InvalidInputError(unmatched)
    for name, table in payment_tables(options).items():  # so must every line of a coupon or principal schedule
        unmatched = unmatched_lines(table, np.concatenate([s["payment_lines"][name] for s in summaries]), name)
        if unmatched:
            raise InvalidInputError(unmatched)
    problems = [p for s in summaries for p in s["problems"]]
    duplicates = _duplicates(path, np.concatenate([s["id_hashes"] for s in summaries]), slices)
    if (problems or duplicates) and options.on_invalid == "strict":
        raise InvalidInputError(problems + duplicates)
    return problems, duplicates


def _duplicates(path: str, hashes: np.ndarray, slices: list[FileSlice]) -> list[DuplicateId]:
    """Problems for rows of a big file whose id another row also holds (the client reads only those ids)."""
    import pyarrow.parquet as pq

    def ids_at(positions):  # a folder's files are read in parquet_files' order, the order its slices number rows
        return to_pandas(pq.read_table(path, columns=["id"]).column("id").take(positions))

    duplicated = duplicated_ids(hashes, ids_at)
    if not len(duplicated):
        return []
    starts = np.array([s.first_row for s in slices])
    problems = []
    for position, label in zip(duplicated, ids_at(duplicated)):
        piece = int(np.searchsorted(starts, position, side="right") - 1)
        problems.append(
            DuplicateId(int(position - starts[piece]), f"row {position + 1} (id {label!r})", "id", DUPLICATE_ID, piece)
        )
    return problems


def _price_slice(chunk: ReadChunk, problems: list[Problem], echo: bool) -> Metered:
    """A slice read by a worker, priced with the problems found across slices (duplicate ids): its
    :class:`~distprice.job.Tally` and its priced tables, metered: a table per scenario for the ``full`` scenario
    table, else one. Without ``echo`` the portfolio's columns are left out where the client puts them back (no
    scenarios, or the full scenario table)."""
    job = chunk.job.with_problems(problems)
    instruments = job.instruments()
    parts = chunk.parts
    if problems:  # rows left the valid set: the one engine of the plan prices the ones that remain
        parts = fixed_plan(parts[0].engine, len(instruments), parts[0].turns).parts if parts else []
    priced = price_chunk(instruments, job.market.curve_sets, parts, job.real, job.risk, job.valid_quotes())
    bond, option, engines, measured = priced.result
    tally = Tally(len(job.table), len(job.market.curve_sets))
    shaped = job.market.scenarios is not None and not job.by_scenario
    columns = tally.add(job.priced_columns(bond, option, engines, measured=measured, echo=echo or shaped))
    tables = [columns.frame(s) for s in range(columns.sets)] if job.by_scenario else [job.table_of(columns)]
    return dataclasses.replace(priced, result=(tally, tables))


def price_read_chunk(chunk: ReadChunk, problems: list[Problem]) -> Metered:
    """The tally and priced tables of a slice read by a worker (:func:`_price_slice`), with the problems found
    across slices (duplicate ids); the portfolio's columns travel only in the long and wide scenario tables
    (the client, which reads the slice too, puts them back: :func:`with_columns`)."""
    return _price_slice(chunk, problems, echo=False)


def write_read_chunk(
    chunk: ReadChunk, problems: list[Problem], folder: str, part: int, parts: int, after=None
) -> Metered:
    """Prices a slice read by a worker (as :func:`price_read_chunk`) and writes its priced table as part
    ``part`` of the folder being built at ``folder`` (for the ``full`` scenario table, parts ``part``,
    ``part + parts``, ... one per curve set); the slice's tally goes back, not its rows, with each part's
    :class:`~distprice.join.Template`, for a client that joins the parts into one file. ``after``: an earlier
    task of the job that must end first (the slice's first writing, which this one replaces)."""
    priced = _price_slice(chunk, problems, echo=True)
    tally, tables = priced.result
    templates = []
    for s, table in enumerate(tables):
        number = part + s * parts
        write_part(table, folder, number)
        templates.append(template(os.path.join(folder, part_name(number))))
    return dataclasses.replace(priced, result=(tally, templates))


def with_columns(piece: FileSlice, priced: pd.DataFrame) -> pd.DataFrame:
    """The priced table of a slice read by a worker: its priced columns (:func:`price_read_chunk`) after its own,
    read here."""
    return echoed(read_slice(piece), priced)


def by_scenario(held, slices: list[FileSlice]):
    """The ``full`` scenario table of a file's slices: every row under the first scenario, then under the
    second... ``held``: each slice's priced columns under each scenario; they are held (the portfolio's columns
    are not: each slice is read again per scenario)."""
    held = list(held)
    for s in range(len(held[0]) if held else 0):
        for piece, frames in zip(slices, held):
            yield echoed(read_slice(piece), frames[s])
