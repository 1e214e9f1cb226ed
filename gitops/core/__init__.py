"""The pure core: endpoints and limits, code sets, local code, diff, budget, plan, apply. No I/O."""
