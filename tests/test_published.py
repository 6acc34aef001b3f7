"""What others published is imported as it was published: checked copies, tidy tables derived from them again
on every run, and provenance that names the source, its licence and what each column means."""

from __future__ import annotations

import json
import shutil

import pytest

from lstmstudy import cli, published


def test_the_stored_tables_are_what_the_raw_files_derive(capsys):
    assert cli.main(["published", "--check"]) == 0, capsys.readouterr().out


def test_a_stored_table_that_differs_is_named(tmp_path, monkeypatch, capsys):
    for path in published.SOURCES_DIR.glob("*.*"):
        shutil.copy(path, tmp_path)
    table = tmp_path / "woolf_imdb_bilstm.csv"
    table.write_text(table.read_text().replace("NVIDIA K80", "NVIDIA K40", 1))
    monkeypatch.setattr(published, "SOURCES_DIR", tmp_path)
    assert cli.main(["published", "--check"]) == 1
    assert capsys.readouterr().out == ("lstmstudy/sources/woolf_imdb_bilstm.csv differs from what the raw files "
                                       "derive: run `lstmstudy published`\n")


@pytest.mark.parametrize("change", ["edited", "missing"])
def test_a_raw_copy_that_is_not_the_published_file_is_one_clear_line(change, tmp_path):
    raw = tmp_path / "raw"
    shutil.copytree(published.RAW_DIR, raw)
    first = raw / published.DEEPBENCH.files[0].here
    if change == "edited":
        first.write_bytes(first.read_bytes() + b"\0")
    else:
        first.unlink()
    with pytest.raises(published.SourceChanged, match="sha256 .* is not the published file's" if change == "edited"
                       else "missing \\(copy it unchanged from results/train/DeepBench_NV_V100.xlsx\\)") as info:
        published.derive(raw)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("source", published.SOURCES, ids=lambda s: s.key)
def test_provenance_names_the_source_its_licence_and_every_column(source):
    stored = json.loads((published.SOURCES_DIR / f"{source.key}.json").read_text())
    assert stored["repository"] == source.repository and len(stored["commit"]) == 40
    assert stored["importer_version"] == published.VERSION and stored["timed"]
    assert (published.RAW_DIR / stored["licence_file"]).read_text().startswith(
        "MIT License" if stored["licence"] == "MIT" else "                                 Apache License")
    table = published.load(stored["table"].removesuffix(".csv"))
    assert list(table.columns) == list(stored["columns"]) and all(stored["columns"].values())
    assert source.key in set(table.source) and {f["here"] for f in stored["files"]} == {
        f"raw/{f.here}" for f in source.files}


def test_the_tables_hold_what_the_sources_published():
    """Cells read off the raw files by hand: the V100 workbook's first LSTM row (hidden 512, batch 16, 25 steps:
    2.197 ms in FP32, 1.411 ms in mixed precision), the P100's pseudo-FP16 sheet (forward 1.371 ms, backward
    1.272 ms), and Woolf's November K80 run with CuDNNLSTM (45.44 s, then 42.78 s)."""
    deepbench = published.load("deepbench_lstm").set_index(["gpu", "precision", "hidden", "batch", "timesteps"])
    assert deepbench.loc[("NVIDIA V100", "fp32", 512, 16, 25), "total_ms"] == 2.197
    assert deepbench.loc[("NVIDIA V100", "fp16_mixed", 512, 16, 25), "total_ms"] == 1.411
    pseudo = deepbench.loc[("NVIDIA Tesla P100", "pseudo_fp16", 512, 16, 25)]
    assert (pseudo.forward_ms, pseudo.backward_ms) == (1.371, 1.272) and pseudo.total_ms != pseudo.total_ms
    sizes = deepbench.reset_index().groupby(["card", "phase", "precision"]).size()
    assert set(sizes[sizes.index.get_level_values("phase") == "train"]) == {22}  # every LSTM row, no GRU row
    assert set(sizes[sizes.index.get_level_values("phase") == "inference"]) == {15}
    trained = set(sizes.index.get_level_values("card")[sizes.index.get_level_values("phase") == "train"])
    assert {"V100", "P100", "1080Ti", "TitanXp", "TitanX_Pascal", "TitanX", "M40"} == trained
    assert set(deepbench.reset_index().query("phase == 'inference'").card) == {"1080Ti", "TitanXp", "TitanX_Pascal"}
    woolf = published.load("woolf_imdb_bilstm")
    k80 = woolf[(woolf.source == "woolf-2017-11") & (woolf.run == "k80") & (woolf.backend == "tensorflow")]
    assert set(k80.lstm_kernel) == {"cudnn"} and k80.epoch_s.round(2).tolist()[:2] == [45.44, 42.78]
    assert set(woolf.batch) == {32} and woolf.groupby(["source", "run", "backend"]).size().eq(4).all()
    assert set(woolf.loc[woolf.lstm_kernel == "cudnn", "device"]) == {"NVIDIA K80", "NVIDIA P100"}
