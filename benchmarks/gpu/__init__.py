"""`zerolock bench gpu`: the GPU check's plan, sections, checks and test log (docs/gpu-check-plan.md)."""
