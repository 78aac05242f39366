"""lathe.train: the command's trainer from Python, to the bit, with a callback per step and Ctrl-C."""
import json
import os
import signal
import subprocess
import threading
import time

import pytest

import lathe

CORPUS = os.path.join(os.environ["LATHE_SOURCE_DIR"], "README.md")
OPTIONS = dict(data=CORPUS, config="tiny", steps=6, batch=4, eval_interval=3, eval_iters=2, ckpt_interval=2,
               sample_tokens=0, threads=1, quiet=True)


def metrics(run_dir):
    return [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]


def without_times(records):
    return [{k: v for k, v in r.items() if k != "tok_per_s"} for r in records]


def test_a_run_from_python_is_the_commands_run_bit_for_bit(tmp_path):
    seen = []
    summary = lathe.train(out=str(tmp_path / "py"), on_step=seen.append, **OPTIONS)
    assert [s["step"] for s in seen] == [1, 2, 3, 4, 5, 6] and summary["steps"] == 6
    assert seen[-1]["loss"] == summary["final_train_loss"] and seen[0]["lr"] > 0
    args = [os.environ["LATHE_BIN"], "train", "--out", str(tmp_path / "cli")]
    for k, v in OPTIONS.items():
        if k != "quiet":
            args += ["--" + k.replace("_", "-"), str(v)]
    subprocess.run(args, check=True, capture_output=True)
    assert without_times(metrics(tmp_path / "py")) == without_times(metrics(tmp_path / "cli"))
    assert [r["loss"] for r in metrics(tmp_path / "py")] == [s["loss"] for s in seen]


def test_ctrl_c_leaves_the_last_checkpoint_whole_and_the_run_resumes(tmp_path):
    # Ctrl-C as a terminal sends it: SIGINT, while the run is in C++ (the GIL released), from another
    # thread once a few steps are recorded. Python notes it; the run sees the note after its step.
    run_dir = str(tmp_path / "run")
    options = dict(OPTIONS, steps=200, eval_interval=10, ckpt_interval=10)

    def interrupt_after_some_steps():
        path = os.path.join(run_dir, "metrics.jsonl")
        while not (os.path.exists(path) and len(open(path).readlines()) >= 12):
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGINT)

    watcher = threading.Thread(target=interrupt_after_some_steps)
    watcher.start()
    with pytest.raises(KeyboardInterrupt):
        lathe.train(out=run_dir, **options)
    watcher.join()
    stopped_at = metrics(run_dir)[-1]["step"]
    assert 12 <= stopped_at < 200  # it stopped soon after Ctrl-C came in, not at its end
    newest = sorted(f for f in os.listdir(run_dir) if f.startswith("ckpt-"))[-1]
    assert lathe.Checkpoint(os.path.join(run_dir, newest)).step == stopped_at // 10 * 10
    lathe.train(resume=run_dir, quiet=True)
    lathe.train(out=str(tmp_path / "whole"), **options)
    assert without_times(metrics(run_dir)) == without_times(metrics(tmp_path / "whole"))


def test_an_exception_in_the_callback_ends_the_run_there(tmp_path):
    def stop_at_3(step):
        if step["step"] == 3:
            raise ValueError("enough")

    with pytest.raises(ValueError, match="enough"):
        lathe.train(out=str(tmp_path / "run"), on_step=stop_at_3, **OPTIONS)
    assert metrics(tmp_path / "run")[-1]["step"] == 3


def test_bad_options_are_lathe_errors_naming_the_option():
    with pytest.raises(lathe.Error, match='unknown key "stepz"'):
        lathe.train(stepz=3)
    with pytest.raises(lathe.Error, match="steps"):
        lathe.train(data=CORPUS, steps=-1, quiet=True)
    with pytest.raises(lathe.Error, match="nowhere.txt"):
        lathe.train(data="/nowhere.txt", steps=1, quiet=True)
