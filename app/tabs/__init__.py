"""The dashboard's tabs, one module each: Lessons, Run, Watch live, Compare, Explain, Readability, Runs."""
