"""The Explain tab's handlers as the page calls them (no browser): refusals in the page's words, the
playback controls, the calculator and the predict-then-reveal questions."""
from __future__ import annotations

import pytest

from app.explain_questions import IDLE, MEMORY, MORE_M, idle_answer, memory_answer, more_m_answer, reveal
from app.memory_calculator import CalcSetting
from app.schedule_costs import cost_rows
from app.tabs import explain as tab

ROWS = cost_rows(None, 3)  # the default table for K = 3
SETTINGS = (3, 4, "gpipe", 2, ROWS, 0, 0)  # K, m, backprop pipeline, v, cost table, latency, send time


@pytest.mark.parametrize("row, cell, value, words", [
    (1, 1, 0, "stage 1: F = 0 ms is out of bounds: choose 0.1 … 1000 ms"),
    (2, 3, 25, "stage 2: W = 25 ms exceeds B = 20 ms"),
    (0, 4, "fast", "stage 0's L = 'fast' is not a number of milliseconds"),
])
def test_a_bad_cost_redraws_both_figures_with_the_reason(row, cell, value, words):
    rows = [list(r) for r in ROWS]
    rows[row][cell] = value
    text, timeline, memory = tab.draw(3, 4, "gpipe", 2, rows, 0, 0)
    assert text.startswith("⚠️ Nothing to draw for K = 3, m = 4") and words in text
    assert words in timeline.layout.annotations[0].text and words in memory.layout.annotations[0].text


def test_a_bad_link_is_refused_in_the_pages_words():
    text, *_ = tab.draw(3, 4, "gpipe", 2, ROWS, -2, 0)
    assert "the link's latency = -2 ms is out of bounds: choose 0 … 1000 ms" in text


def test_the_api_keeps_taking_k_m_and_the_pipeline_alone():
    text, timeline, memory = tab.draw(4, 6, "gpipe")
    assert "6, 6, 6, 6" in text and "1, 1, 1, 1" in text


def test_the_slider_spans_the_new_step_and_the_controls_walk_it():
    slider, caption, timer, *cleared = tab.settings_changed(*SETTINGS)
    assert slider.maximum == slider.value == 180.0 and "whole step" in caption and cleared == ["", ""]
    t, _, caption = tab.step_to(0.0, 1, *SETTINGS)
    # at 0 stage 0's F0 started, and stages 1 and 2 began waiting for their first hidden state
    assert t == 10.0 and "t = 10.0 ms" in caption and "GPipe: 3 of 59 actions started (latest: stage 0 F0)" in caption
    t, _, _ = tab.step_to(t, -1, *SETTINGS)
    assert t == 0.0
    t, _, _, timer = tab.tick(170.0, *SETTINGS)
    assert t == 180.0 and timer.active is False  # the end of the step stops the playback


def test_the_calculator_refuses_a_setting_out_of_bounds_and_counts_a_good_one():
    figure, words, _ = tab.calculate("llama-2-7b", 4, 8, 8, 512, 2.5, "bf16")
    assert words.startswith("⚠️ rank must be a whole number") and "Nothing to count" in figure.layout.annotations[0].text
    figure, words, _ = tab.calculate("llama-2-7b", 4, 8, 8.0, 512.0, 8.0, "bf16")
    assert "4.0× less activation memory than 1F1B" in words and len(figure.layout.annotations) == 4  # 4 titles


@pytest.mark.parametrize("question, picked, answer, verdict", [
    (IDLE, "they all idle the same", lambda: idle_answer(stages=3, microbatches=4, bp_method="1f1b"), "Right"),
    (IDLE, "the first", lambda: idle_answer(stages=3, microbatches=4, bp_method="gpipe"), "Not quite"),
    (MORE_M, None, lambda: more_m_answer(stages=3, microbatches=4, bp_method="gpipe"), "The answer: shrinks"),
    (MEMORY, "about K×", lambda: memory_answer(CalcSetting(stages=4, microbatches=8)), "Right: about K×"),
    (MEMORY, "about K×", lambda: memory_answer(CalcSetting(stages=4, microbatches=2)), "Not quite: about 2×"),
])
def test_a_reveal_gives_the_answer_of_the_settings_on_screen(question, picked, answer, verdict):
    assert verdict in reveal(question, picked, answer)


def test_a_reveal_for_settings_with_no_schedule_says_why():
    said = reveal(MORE_M, None, lambda: more_m_answer(stages=4, microbatches=7, bp_method="interleaved-1f1b"))
    assert said.startswith("No answer for these settings: interleaved 1F1B runs m micro-batches")
