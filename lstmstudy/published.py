"""LSTM measurements published by others, imported as tidy tables with their provenance.

Evidence of a third kind, beside "measured here on a GPU" and "CPU analogue": measured by others, on their
hardware and software, by their method. It is cited and judged by the claims' own rules, and never counted as
this study's. The raw files are copied unchanged from the repositories below into `lstmstudy/sources/raw/`,
with each repository's licence. `derive()` checks each copy against its sha256 and reads it into one tidy
table per kind of source, one row per published measurement, units in the column names. `write()` stores the
tables in `lstmstudy/sources/` beside one provenance JSON per source (`lstmstudy published`); the test suite
derives them again and fails on any difference.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from lstmstudy.errors import StudyError

#: the importer's version, stored in every provenance file: raise it when a derived table changes
VERSION = 1
SOURCES_DIR = Path(__file__).resolve().parent / "sources"
RAW_DIR = SOURCES_DIR / "raw"


class SourceChanged(StudyError):
    """A raw copy is missing or differs from the file the provenance names (its sha256)."""


@dataclass(frozen=True)
class RawFile:
    here: str  # under raw/
    path: str  # in the repository, at the source's commit
    sha256: str


@dataclass(frozen=True)
class Source:
    key: str  # the provenance file's name and the `source` column
    repository: str
    commit: str
    licence: str
    licence_file: str  # under raw/: the repository's own licence text
    citation: str  # a key of references.bib
    timed: str  # what the source timed, in its own method
    files: tuple[RawFile, ...]


def _deepbench_file(kind: str, gpu: str, sha256: str) -> RawFile:
    name = f"results_{kind}_DeepBench_NV_{gpu}.xlsx"
    path = f"results/{kind.replace('_', '/')}/DeepBench_NV_{gpu}.xlsx"
    return RawFile(f"deepbench/{name}", path, sha256)


DEEPBENCH = Source(
    key="deepbench", repository="baidu-research/DeepBench", commit="da81ba7820739e2e506dc27f382d15be5479f98f",
    licence="Apache-2.0", licence_file="deepbench/LICENSE", citation="deepbench",
    timed=("cuDNN's LSTM kernels alone (code/kernels/rnn_problems.h): the input GEMM skipped, 100 calls queued "
           "and one device sync, per-call time reported; training sheets time forward, backward with respect to "
           "the inputs and backward with respect to the weights"),
    files=(
        _deepbench_file("train", "V100", "a116628325019ff75a6c25186bc2da3f419f3f92010f4d8bdf1806c01c71e878"),
        _deepbench_file("train", "P100", "a38693b37196a18e74ab499d1072780f7d349675e3431936689d4716adce5537"),
        _deepbench_file("train", "1080Ti", "7107895863958ea6eadaeeac3e3f08e9aa32ab90ee0922be776a4d13720ffe65"),
        _deepbench_file("train", "TitanXp", "79d2b89bbc18ae4803cd7d5952f3821198d0f8c604bdf358fb68a4049abaa7f5"),
        _deepbench_file("train", "TitanX_Pascal", "5e0cd14e829624163e2414a121db608fbee54016cfb8175e8e30fbdc965dc974"),
        _deepbench_file("train", "TitanX", "c56150a8cc37b8859f4e374ed922b98efc4cb7266763f419ac28b6f99917a04e"),
        _deepbench_file("train", "M40", "cecfc0a0bebb1159a7a9712765ab932d1e785ee0e10cb1ab5dafce4effe093a2"),
        _deepbench_file("inference_server", "1080Ti",
                        "7424158291be4a1ea1946ac2435d89e5602fdad94e081654b2af2c4ea6855147"),
        _deepbench_file("inference_server", "TitanX_Pascal",
                        "fe3dee68bbd9a679c51552fc97a7f7f8621977b58f752dd131cacbfe082355ea"),
        _deepbench_file("inference_server", "TitanXp",
                        "a3a731f1b67b831648d562f6ae4bf6d25c3e77c5f92c02404df2b6cc3ed6df60"),
    ))

_IMDB = "imdb_bidirectional_lstm"
WOOLF_JULY = Source(
    key="woolf-2017-07", repository="minimaxir/deep-learning-cpu-gpu-benchmark",
    commit="08adcf499e9859db790a569716454391f450db13", licence="MIT",
    licence_file="woolf/deep-learning-cpu-gpu-benchmark.LICENSE", citation="woolf-cloud-cpus",
    timed=("epochs of `model.fit` on Keras's IMDb bidirectional LSTM example (LSTM 64 units, maxlen 100, batch "
           "32) on TensorFlow, timed by a callback from `on_epoch_begin` to `on_epoch_end`: the epoch's training "
           "and its evaluation of the 25,000 validation reviews, and in epoch 0 the start-up too "
           "(test_files/CustomCallback.py); Keras's generic LSTM on the GPU and the CPUs; the GPU is a K80, named "
           "in the blog post the repository accompanies, not in the repository"),
    files=(RawFile(f"woolf/cpugpu_logs_gpu_{_IMDB}_tensorflow.csv", f"logs/gpu/{_IMDB}_tensorflow.csv",
                   "8a0482a27c3ae4ddff2b46a3e9f2543d8ca545f1848364c354c70bdf581b2a5c"),
           *(RawFile(f"woolf/cpugpu_logs_cpu-{build}_cpu{n}_{_IMDB}_tensorflow.csv",
                     f"logs/cpu-{build}/cpu{n}/{_IMDB}_tensorflow.csv", sha)
             for build, n, sha in (
                 ("pip", 8, "cb9c455e16c952ff20fe24a73d166a2c1557abf638707b6deb46ef5466a9dcf1"),
                 ("pip", 16, "079b73e127c83912e535bea796b629b9d0b82d2e01d4b1cf21fd8d168fbbb4fa"),
                 ("pip", 32, "9b8557b1afd9c75c6b516e11b21a2c3973052ace4ccb3d66b4e54bae13f04262"),
                 ("pip", 64, "c875dc071f37d68c068ad86c3fb0266dc050ec70a8e8d3965bbd67825c977b76"),
                 ("compiled", 8, "c77088a5014955b61cebfefd3fcdcc4e02d86136e326c0866142ebdeeacb17b9"),
                 ("compiled", 16, "ed755ecf7dba1d6901e0de14aaf118f9c6d6564abdc4a939b443a6f7f3d7abeb"),
                 ("compiled", 32, "5cc0f3bfeebb4b83a82f577f7b7a032d9b5ce98f327e6cf449e83f8bc6817243"),
                 ("compiled", 64, "c1a90e0757cdb66b996b8950efdca3e3702a06bb02354382c0788ab32da7f4c0")))))
WOOLF_NOVEMBER = Source(
    key="woolf-2017-11", repository="minimaxir/keras-cntk-benchmark",
    commit="5b95f4640f371e0b532f0a14f6bb05466f41eef1", licence="MIT",
    licence_file="woolf/keras-cntk-benchmark.LICENSE", citation="woolf-modern-gpus",
    timed=("the same model and timing as July 2017 (v2/ of the repository), with a newer TensorFlow: "
           "`CuDNNLSTM` where TensorFlow sees a GPU (v2/test_files/imdb_bidirectional_lstm.py), Keras's generic "
           "LSTM on the CPUs and on CNTK"),
    files=tuple(RawFile(f"woolf/kcntk_v2_logs_{where}_{_IMDB}_{backend}.csv",
                        f"v2/logs/{where}/{_IMDB}_{backend}.csv", sha)
                for where, backend, sha in (
                    ("k80", "tensorflow", "4a134ebc8c2df6dbcc8b5e25b668d8fda48048cfc535632a8ca14b29879e9587"),
                    ("p100", "tensorflow", "bc823bc1589d2b64e18828a492ffbd83a92b322ddd64ad14de0897102025189a"),
                    ("k80", "cntk", "72898c47d7c965a58c767acf572f3ff64a6ba82ad881eb9dec8e2568be4c5a07"),
                    ("p100", "cntk", "82d30c4a333390e0029559ecc3a08e3553bebb24feee4a7377df9b3736d6a7fa"),
                    ("cpu16", "tensorflow", "da207c1d0b18934469bceffc6676ca926368217a4c2f05d0d7ac9c70527cc5e9"),
                    ("cpu32", "tensorflow", "e7d2573d461b020882082278206116aef371f3f412c503af956656232a9ecbc4"))))
SOURCES = (DEEPBENCH, WOOLF_JULY, WOOLF_NOVEMBER)

#: what each column of the tidy tables means (stored in the provenance files)
COLUMNS = {
    "deepbench_lstm": {
        "source": "the provenance file's key", "gpu": "the GPU, as the workbook's Specs sheet names it",
        "card": "the GPU as the workbook's file name has it: one name for a card's training and inference "
                "workbooks, whose Specs sheets name it differently",
        "cuda": "CUDA version (Specs)", "cudnn": "cuDNN version (Specs)",
        "phase": "train (training sheets) or inference (server inference sheets)",
        "precision": "fp32; fp16_mixed (16-bit inputs and multiplication, 32-bit accumulation); pseudo_fp16 "
                     "(16-bit inputs, 32-bit multiplication and accumulation), as the sheet's first line says; "
                     "the inference sheets run their RNNs in single precision (their second line)",
        "sheet": "the workbook's sheet", "application": "DeepBench's `Source` column, where the sheet has one",
        "hidden": "hidden units (the inference sheets call the column `Input`)", "batch": "N, the batch size",
        "timesteps": "sequence length",
        "forward_ms": "time of the forward call, ms", "backward_inputs_ms": "backward with respect to the inputs, ms",
        "backward_weights_ms": "backward with respect to the weights, ms",
        "backward_ms": "backward in one figure, ms (the P100's pseudo-FP16 sheet only)",
        "total_ms": "the sheet's `Total Time`, ms, as published (forward + both backwards)"},
    "woolf_imdb_bilstm": {
        "source": "the provenance file's key", "run": "the log's folder in the repository",
        "device": "the device the run trained on", "device_kind": "gpu or cpu",
        "vcpus": "virtual CPUs of the cloud instance (CPU runs)",
        "tensorflow_build": "pip or compiled (July 2017 CPU runs: TensorFlow from pip or built for the CPU)",
        "backend": "Keras's backend", "lstm_kernel": "cudnn (CuDNNLSTM) or generic (Keras's LSTM)",
        "batch": "batch size (32 in every run)", "epoch": "0-based epoch",
        "epoch_s": "wall time of the epoch, s (`elapsed` in the log): training and the validation pass, and in "
                   "epoch 0 the start-up", "loss": "training loss",
        "acc": "training accuracy", "val_loss": "validation loss", "val_acc": "validation accuracy"},
}
PRECISIONS = {"fp32": "fp32", "float": "fp32", "16 bit inputs, 16 bit multiplication, 32 bit addition": "fp16_mixed",
              "16 bit inputs, 32 bit multiplication, 32 bit addition": "pseudo_fp16"}
#: DeepBench's LSTM header cells, normalised (lower case, single spaces), and the tidy column each fills
HEADERS = {"source": "application", "hidden units": "hidden", "input": "hidden", "n": "batch",
           "timesteps": "timesteps", "time forward (msec)": "forward_ms",
           "time backward wrt inputs (msec)": "backward_inputs_ms",
           "time backward wrt weights (msec)": "backward_weights_ms", "time backward (msec)": "backward_ms",
           "total time": "total_ms"}


def _checked(file: RawFile, raw: Path) -> Path:
    path = raw / file.here
    if not path.exists():
        raise SourceChanged(f"{path}: missing (copy it unchanged from {file.path})")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != file.sha256:
        raise SourceChanged(f"{path}: sha256 {digest[:12]}... is not the published file's {file.sha256[:12]}...")
    return path


def _deepbench_rows(path: Path) -> list[dict]:
    """Every LSTM row of one DeepBench workbook, with its sheet's precision and the Specs sheet's versions."""
    import openpyxl

    book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    specs = {str(k).strip(): v for k, v, *_ in book["Specs"].iter_rows(values_only=True) if k}
    phase = "train" if "_train_" in path.name else "inference"
    rows = []
    for sheet in (s for s in book.sheetnames if s != "Specs"):
        cells = [list(r) for r in book[sheet].iter_rows(values_only=True)]
        if phase == "train":
            precision = PRECISIONS[str(cells[0][1]).strip().lower()]
        elif "RNN: single precision" in str(cells[1][1]):
            precision = "fp32"
        else:
            raise SourceChanged(f"{path}: sheet {sheet!r} does not say its RNNs run in single precision")
        start = next(i for i, r in enumerate(cells) if str(r[0] or "").startswith("Recurrent Layers - LSTM"))
        named = {j: re.sub(r"\s+", " ", str(c)).strip().lower() for j, c in enumerate(cells[start]) if c}
        header = {j: HEADERS[text] for j, text in named.items() if text in HEADERS}
        hidden = next(j for j, name in header.items() if name == "hidden")
        found = []
        for r in cells[start + 1:]:
            if isinstance(r[0], str):  # the next section's header
                break
            if r[hidden] is None:  # a blank row: the section ends after its rows
                if found:
                    break
                continue
            found.append({"gpu": specs["GPU Model"], "card": path.stem.rsplit("_NV_", 1)[1],
                          "cuda": str(specs["CUDA Version"]),
                          "cudnn": str(specs["Cudnn Version"]), "phase": phase, "precision": precision,
                          "sheet": sheet, **{name: r[j] for j, name in header.items()}})
        if not found:
            raise SourceChanged(f"{path}: sheet {sheet!r} has no LSTM rows")
        rows += found
    return rows


def _woolf_rows(source: Source, file: RawFile, path: Path) -> list[dict]:
    run = file.path.rsplit("/", 1)[0].removeprefix("v2/").removeprefix("logs/")
    backend = file.path.rsplit("_", 1)[1].removesuffix(".csv")
    where = run.rsplit("/", 1)[-1]
    gpu = {"gpu": "NVIDIA K80", "k80": "NVIDIA K80", "p100": "NVIDIA P100"}.get(where)
    vcpus = int(where.removeprefix("cpu")) if gpu is None else None
    cudnn = source is WOOLF_NOVEMBER and gpu is not None and backend == "tensorflow"
    info = {"run": run, "device": gpu or f"{vcpus} vCPUs", "device_kind": "gpu" if gpu else "cpu", "vcpus": vcpus,
            "tensorflow_build": run.split("/")[0].removeprefix("cpu-") if run.startswith("cpu-") else "",
            "backend": backend, "lstm_kernel": "cudnn" if cudnn else "generic", "batch": 32}
    log = pd.read_csv(path)
    return [{**info, "epoch": int(e.epoch), "epoch_s": e.elapsed, "loss": e.loss, "acc": e.acc,
             "val_loss": e.val_loss, "val_acc": e.val_acc} for e in log.itertuples()]


def derive(raw: Path = RAW_DIR) -> dict[str, pd.DataFrame]:
    """The tidy tables, from the raw copies under `raw` (each checked against its sha256 first)."""
    with warnings.catch_warnings():  # the workbooks' formatting extensions, which openpyxl drops as it reads
        warnings.filterwarnings("ignore", message="Unknown extension is not supported", category=UserWarning)
        deepbench = [{"source": DEEPBENCH.key, **row} for f in DEEPBENCH.files
                     for row in _deepbench_rows(_checked(f, raw))]
    woolf = [{"source": s.key, **row} for s in (WOOLF_JULY, WOOLF_NOVEMBER) for f in s.files
             for row in _woolf_rows(s, f, _checked(f, raw))]
    tables = {"deepbench_lstm": pd.DataFrame(deepbench), "woolf_imdb_bilstm": pd.DataFrame(woolf)}
    for name, frame in tables.items():
        tables[name] = frame.reindex(columns=list(COLUMNS[name]))
    tables["woolf_imdb_bilstm"]["vcpus"] = tables["woolf_imdb_bilstm"]["vcpus"].astype("Int64")
    return tables


def provenance(source: Source) -> dict:
    """What a source's provenance file holds: where each file comes from, its licence, what it timed, what
    each column of its table means, and the importer's version."""
    table = "deepbench_lstm" if source is DEEPBENCH else "woolf_imdb_bilstm"
    return {**{k: v for k, v in asdict(source).items() if k != "files"}, "importer_version": VERSION,
            "table": f"{table}.csv", "columns": COLUMNS[table],
            "files": [{"here": f"raw/{f.here}", "path": f.path, "sha256": f.sha256} for f in source.files]}


def rendered(raw: Path = RAW_DIR) -> dict[str, str]:
    """Every derived file's text, by its name under `lstmstudy/sources/`."""
    out = {f"{name}.csv": frame.to_csv(index=False, lineterminator="\n") for name, frame in derive(raw).items()}
    out |= {f"{s.key}.json": json.dumps(provenance(s), indent=2) + "\n" for s in SOURCES}
    return out


def stale(folder: Path | None = None) -> list[str]:
    """The derived files under `folder` (default `SOURCES_DIR`) missing or differing from what `raw/` derives."""
    folder = folder or SOURCES_DIR
    return [name for name, text in rendered().items()
            if not (folder / name).exists() or (folder / name).read_text(encoding="utf-8") != text]


def write(folder: Path = SOURCES_DIR) -> list[Path]:
    """Derive the tables and provenance files again into `folder`; return what was written."""
    written = []
    for name, text in rendered().items():
        (folder / name).write_text(text, encoding="utf-8")
        written.append(folder / name)
    return written


def cited() -> dict[str, dict]:
    """The sources cited, not copied (`sources/cited.json`), by key: NVIDIA's GNMT READMEs and issue threads,
    each with its figures quoted verbatim (tables as the README's own rows) and parsed beside the quote."""
    entries = json.loads((SOURCES_DIR / "cited.json").read_text(encoding="utf-8"))["sources"]
    return {entry["key"]: entry for entry in entries}


def citation(key: str) -> str:
    """The references.bib key of a source, imported (`deepbench`) or cited (`gnmt-pytorch`)."""
    imported = {s.key: s.citation for s in SOURCES}
    return imported[key] if key in imported else cited()[key]["citation"]


def gnmt_training() -> pd.DataFrame:
    """NVIDIA's GNMT v2 training throughput, PyTorch and TensorFlow READMEs, one row per table row: tokens/s at
    the baseline precision (FP32 or TF32) and in mixed precision, the printed speed-up and the printed scaling
    over GPUs (PyTorch's README calls it strong scaling, TensorFlow's weak; both keep 128 sequences per GPU)."""
    rows = []
    for key in ("gnmt-pytorch", "gnmt-tensorflow"):
        for r in cited()[key]["rows"]:
            base = r["precision_baseline"].lower()
            pick = lambda *names: next(r[n] for n in names if n in r)  # noqa: E731: the READMEs spell units apart
            kind = "strong" if any(k.startswith("strong_scaling") for k in r) else "weak"
            rows.append({"source": key, "framework": key.removeprefix("gnmt-"), "system": r["system"],
                         "gpu": r["gpu"], "container": r["container"], "gpus": r["gpus"],
                         "batch_per_gpu": r["batch_size_per_gpu"], "baseline": r["precision_baseline"],
                         "baseline_tok_s": pick(f"throughput_{base}_tok_per_s", f"throughput_{base}_tokens_per_s"),
                         "mixed_tok_s": pick("throughput_mixed_precision_tok_per_s",
                                             "throughput_mixed_precision_tokens_per_s"),
                         "speedup_printed": r[f"throughput_speedup_{base}_to_mixed_precision_x"],
                         "scaling": kind, "scaling_baseline_printed": r[f"{kind}_scaling_{base}_x"],
                         "scaling_mixed_printed": r[f"{kind}_scaling_mixed_precision_x"]})
    return pd.DataFrame(rows)


def deepbench_shapes() -> list[tuple[int, int, int]]:
    """DeepBench's LSTM training shapes as (hidden, batch, timesteps), in its order (input size = hidden size): the
    GPU grids of claims 3 and 4 include them, so that a GPU set lands row for row beside the published V100."""
    table = load("deepbench_lstm")
    rows = table[(table.card == "V100") & (table.precision == "fp32")]
    return [(int(r.hidden), int(r.batch), int(r.timesteps)) for r in rows.itertuples()]


def sources_table() -> pd.DataFrame:
    """Every published source the book uses: imported (raw files shipped with their licences) or cited (figures
    quoted from a README or an issue thread), where it lives, its licence and what it timed."""
    rows = [{"source": s.key, "kind": "imported", "citation": s.citation,
             "where": f"{s.repository} @ {s.commit[:7]}", "licence": s.licence, "what was timed": s.timed}
            for s in SOURCES]
    for key, entry in cited().items():
        where = (f"{entry['repository']} @ {entry['commit'][:7]}: {entry['path']}" if "path" in entry
                 else f"{entry['repository']}#{entry['issue']}")
        rows.append({"source": key, "kind": "cited", "citation": entry["citation"], "where": where,
                     "licence": entry.get("licence", "quoted, not copied"), "what was timed": entry["what"]})
    return pd.DataFrame(rows)


def load(table: str) -> pd.DataFrame:
    """A tidy table as stored (`deepbench_lstm`, `woolf_imdb_bilstm`), read without openpyxl."""
    return pd.read_csv(SOURCES_DIR / f"{table}.csv")
