"""The GPU and multi-process benchmarks run here too, at small sizes, so that they cannot rot
while no GPU is at hand (their numbers live in BENCHMARKS.md, never in tests)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lmlow.loss import BF16_BLOCKS, BF16_VOCAB_BLOCK, CACHED_ELEMENTS, FP32_BLOCKS, VOCAB_BLOCK

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def run(script, *args):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, str(BENCH / script), *map(str, args)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_gpu_speed_runs_on_the_cpu(tmp_path):
    out = run("gpu_speed.py", "--device", "cpu", "--preset", "tiny", "--vocab", "300", "2000",
              "--precision", "fp32", "--steps", "1", "--json", tmp_path / "rows.json")
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert [r["vocab"] for r in rows] == [300, 2000]
    assert all(r["plain_tokens_per_s"] > 0 and r["lmlow_tokens_per_s"] > 0 for r in rows)
    assert out.count("| 2,000 | fp32 |") == 1


@pytest.mark.slow
def test_ddp_scaling_runs_on_the_cpu(speech_corpus):
    out = run("ddp_scaling.py", speech_corpus, "--preset", "tiny", "--steps", "20")
    lines = [line for line in out.splitlines() if line.startswith("| 1 ") or line.startswith("| 2 ")]
    assert len(lines) == 2 and lines[0].endswith("| 1.00 |")


@pytest.mark.parametrize("script,args", [("gpu_speed.py", []), ("gpu_waits.py", ["corpus"])])
def test_gpu_scripts_say_in_one_line_that_there_is_no_gpu(script, args):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    r = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "no CUDA GPU" in r.stderr


def test_transformer_speed_runs_on_the_cpu(tmp_path):
    out = run("transformer_speed.py", "--vocab", "500", "--steps", "1", "--repeats", "1",
              "--batch", "2", "--bptt", "8", "--json", tmp_path / "rows.json",
              "--profile", tmp_path / "profiles")
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert [r["model"] for r in rows] == ["lmlow Transformer", "nn.TransformerEncoder",
                                          "lmlow LSTM (small)"]
    assert all(r["tokens_per_s"] > 0 for r in rows) and rows[0]["ratio"] == 1.0
    sizes = [r["params_without_embeddings"] for r in rows]
    assert max(sizes) / min(sizes) < 1.1                      # compared at equal parameters
    assert out.count("| fp32 |") == 3
    profiles = sorted(f.name for f in (tmp_path / "profiles").iterdir())
    assert profiles == ["fp32-lmlow-LSTM-small.txt", "fp32-lmlow-Transformer.txt",
                        "fp32-nnTransformerEncoder.txt"]
    assert all("aten::mm" in (tmp_path / "profiles" / f).read_text() for f in profiles)


def test_score_speed_runs_on_the_cpu():
    out = run("score_speed.py", "--vocab", "300", "--tokens", "400", "--repeats", "1")
    assert "300 words" in out and "tokens/s scored" in out


def test_prebuilt_fixtures_are_the_fixtures_a_full_machine_makes(speech_corpus, tmp_path):
    """tools/prebuilt_fixtures.py (for a GPU machine without spaCy and GloVe) writes the same
    corpus as the session's fixture, and vectors of the same words and size; a second call on
    the same folder is refused."""
    tool = Path(__file__).resolve().parents[1] / "tools" / "prebuilt_fixtures.py"
    out = tmp_path / "fixtures"
    r = subprocess.run([sys.executable, str(tool), str(out)], capture_output=True, text=True,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr
    for split in ("train", "valid", "test"):
        assert (out / "speech-corpus" / f"{split}.txt").read_bytes() == \
            (speech_corpus / f"{split}.txt").read_bytes()
    lines = (out / "vectors.txt").read_text().splitlines()
    assert len(lines) > 100 and all(len(line.split()) == 25 for line in lines)   # word + 24
    again = subprocess.run([sys.executable, str(tool), str(out)], capture_output=True, text=True)
    assert again.returncode == 2 and "exists" in again.stderr


@pytest.mark.parametrize("precision,vocab", [("fp32", 300), ("bf16", 300), ("fp32", 1200),
                                             ("bf16", 9000)])
def test_loss_parts_times_each_part_of_a_chunk_and_the_whole_loss(precision, vocab):
    """Every part timed, the bias and softmax also a few rows at a time as the loss runs them
    on a CPU, and at a vocabulary above two blocks (fp32: 1,200 words, blocks of
    lmlow.loss.VOCAB_BLOCK; bf16: 9,000, of BF16_VOCAB_BLOCK) the matmuls the loss takes
    block by block (fp32 both, bf16 the logits'), checked to give the one call's bits."""
    out = run("loss_parts.py", "--vocab", str(vocab), "--dim", "8", "--tokens", "50",
              "--repeats", "1", "--precision", precision, "--square", "64")
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    step = min(50, max(1, CACHED_ELEMENTS // vocab))
    names = ["logits = h W^T", "+ bias", "softmax", "dh = G W", "dW^T += [h;1]^T G",
             f"bias, softmax, rounding back: {step} rows at a time"]
    if vocab > 2 * VOCAB_BLOCK and precision == "fp32" and FP32_BLOCKS:   # (an AMD or AVX2 CPU)
        names += [f"logits = h W^T, {VOCAB_BLOCK} words a call",
                  f"dW^T += [h;1]^T G, {VOCAB_BLOCK} words a call"]
        assert "blocks against one call, the same to the bit: logits True, d loss / d W True" in out
    if vocab > 2 * BF16_VOCAB_BLOCK and precision == "bf16" and BF16_BLOCKS:   # (AMX)
        names += [f"logits = h W^T, {BF16_VOCAB_BLOCK} words a call"]
        assert "blocks against one call, the same to the bit: logits True\n" in out
    if len(names) > 6:
        assert "the fused loss and its three gradients, blocks against one call, the same to " \
            "the bit: True" in out
    assert [r.split(" | ")[0][2:] for r in rows] == names
    assert all(float(r.split(" | ")[2].rstrip(" |")) > 0 for r in rows if "W" in r.split(" | ")[0])
    assert f"{precision}, V {vocab:,}, d 8" in out and "tokens/s)" in out
    ceiling = re.search(rf"a square product, 64 x 64 x 64, in {precision}: ([0-9.]+) GFLOP/s", out)
    assert ceiling and float(ceiling.group(1)) > 0


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_loss_ab_tells_a_change_of_bits_from_none(tmp_path, precision):
    """loss_ab.py, given two trees whose losses agree, says so for the loss and its three
    gradients; given one whose bias is off by one part in 1e4, says the bits differ."""
    source = (BENCH.parent / "lmlow" / "loss.py").read_text()
    trees = {}
    for name, text in (("same", source),
                       ("off", source.replace("bias32 = bias.float()", "bias32 = bias.float() * 1.0001"))):
        (tmp_path / name / "lmlow").mkdir(parents=True)
        (tmp_path / name / "lmlow" / "loss.py").write_text(text)
        trees[name] = tmp_path / name
    assert "bias.float() * 1.0001" in (trees["off"] / "lmlow" / "loss.py").read_text()
    args = ["--vocab", "300", "--dim", "8", "--tokens", "40", "--rounds", "1", "--precision", precision]
    agree = run("loss_ab.py", BENCH.parent, trees["same"], *args)
    assert "the same to the bit (loss, d/dh, d/dW, d/db): True, True, True, True" in agree
    assert "new / old speed: " in agree and "tokens/s" in agree
    differ = run("loss_ab.py", BENCH.parent, trees["off"], *args)
    assert "the same to the bit (loss, d/dh, d/dW, d/db): False" in differ
    frozen = run("loss_ab.py", BENCH.parent, trees["same"], *args, "--frozen-output")
    assert "the same to the bit (loss, d/dh, d/dW, d/db): True, True, True, True" in frozen
    assert "largest difference (loss, d/dh, d/dW, d/db): 0, 0, 0, 0" in frozen


@pytest.mark.parametrize("script,preset,args", [
    ("predict_speed.py", "tiny", ["--lines", "1"]),
    ("predict_speed.py", "transformer-tiny", ["--lines", "1"]),
    ("rerank_speed.py", "tiny", ["--lines", "5", "--repeats", "1"])])
def test_the_scoring_benchmarks_run(script, preset, args, tmp_path):
    """The next-word and n-best benchmarks, at a tiny preset on a few lines: one row per
    model, every number positive (the exported step's too, LSTM or Transformer); the work
    folder is the one given."""
    out = run(script, "--preset", preset, "--work", tmp_path / "work", *args)
    first = "Transformer" if preset.startswith("transformer") else "LSTM"
    rows = [line.split(":") for line in out.splitlines()
            if line.strip().startswith((first, "KenLM", "mixture"))]
    assert [name.strip().split()[0] for name, _ in rows] == [first, "KenLM", "mixture"]
    assert all(float(v) > 0 for _, numbers in rows for v in numbers.split()[:2])
    assert {p.name for p in (tmp_path / "work").iterdir()} >= {"lstm", "kn5"}
    if script == "predict_speed.py":                 # and lmlow predict's loop
        assert all(float(numbers.split()[2]) > 0 for _, numbers in rows)
        assert float(out.split("torch.export.load): ")[1].split()[0]) > 0


@pytest.mark.parametrize("precision,vocab,block", [("fp32", 1200, VOCAB_BLOCK),
                                                   ("bf16", 9000, BF16_VOCAB_BLOCK)])
def test_loss_parts_with_blocks_takes_them_on_any_cpu_and_times_the_loss_both_ways(
        precision, vocab, block):
    """--blocks: the blocked matmuls timed even on a CPU where lmlow takes one call (how a new
    kind of CPU is measured), the same bits both ways, and the fused loss timed both ways."""
    out = run("loss_parts.py", "--vocab", str(vocab), "--dim", "8", "--tokens", "50",
              "--repeats", "1", "--precision", precision, "--square", "0", "--blocks")
    assert f"| logits = h W^T, {block} words a call | " in out
    assert "the fused loss and its three gradients, blocks against one call, the same to the " \
        "bit: True" in out
    times = out.split("the fused loss, forward and backward: blocks ")[1].split("\n")[0]
    blocks = float(times.split(" s,")[0])
    one_call = float(times.split("one call ")[1].split(" s")[0])
    assert blocks > 0 and one_call > 0


def test_logits_rows_compares_blocks_with_one_call_and_names_lmlows_pick():
    """One row per vocabulary and row count, both timings positive, the two ways the same to
    the bit, and lmlow's pick: one call for one row, blocks from lmlow.loss.BLOCK_ROWS on a
    CPU where fp32 takes blocks (FP32_BLOCKS: AMD or AVX2), one call elsewhere."""
    from lmlow.loss import BLOCK_ROWS

    out = run("logits_rows.py", "--vocab", "600", "--dim", "8", "--rows", "1", str(BLOCK_ROWS),
              "--repeats", "1")
    rows = [line.strip("|").split("|") for line in out.splitlines() if line.startswith("| 600")]
    assert [int(r[1]) for r in rows] == [1, BLOCK_ROWS]
    assert all(float(r[2]) > 0 and float(r[3]) > 0 and r[5].strip() == "True" for r in rows)
    assert [r[6].strip() for r in rows] == ["one call", "blocks" if FP32_BLOCKS else "one call"]


@pytest.mark.parametrize("name", ["v.txt", "v.bin"])
def test_vector_load_reads_both_formats_as_gensim_does(tmp_path, name):
    """benchmarks/vector_load.py on a small random file of each format it makes: lmlow's
    reader and gensim's read the same words and float32 bits."""
    f = tmp_path / name
    run("vector_load.py", f, "--make", "--words", "300", "--dim", "8")
    out = run("vector_load.py", f, "--repeat", "1")
    assert "300 words x 8 dims" in out and "same words and float32 bits: True" in out


def test_prepare_memory_prepares_both_folders_with_the_code_asked_for(speech_corpus, tmp_path):
    """benchmarks/prepare_memory.py on a small text: both folders prepared, a row each; and
    --code that python would not import from is refused (from a checkout, `python -m` took
    the checkout's lmlow instead, and two commits measured the same code)."""
    text = speech_corpus / "train.txt"
    out = run("prepare_memory.py", "--sources", text, text, "--work", tmp_path / "w",
              "--pieces", "3", "--label", "here")
    rows = [json.loads(line) for line in (tmp_path / "w" / "prepare_memory.jsonl").open()]
    assert [r["folder"] for r in rows] == ["one-large", "all-small"] and "| here |" in out
    assert all(r["peak_rss_mb"] > 0 and r["input_mb"] == rows[0]["input_mb"] for r in rows)
    r = subprocess.run([sys.executable, str(BENCH / "prepare_memory.py"), "--sources", text,
                        "--work", tmp_path / "w", "--code", tmp_path], capture_output=True,
                       text=True)
    assert r.returncode != 0 and "python imports lmlow from" in r.stderr
