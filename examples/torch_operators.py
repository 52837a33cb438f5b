"""See which PyTorch operators a policy's update spends its time in, under rlprof's blocks.

    python examples/torch_operators.py [OUTPUT_DIR]
    rlprof analyze OUTPUT_DIR/torch_operators_timers.json --aggregate-by type -t 10

``set_config(profile_all=True)`` (as in MXNet) runs PyTorch's own profiler beside rlprof's
timers while the profiler runs: each operator lands under the block that ran it
(``aten::addmm`` under ``policy.forward``), with its input shapes, FLOPs and the CPU memory it
allocated, and ``rlprof analyze`` ranks them as MegEngine's ``profile_analyze`` does.
Needs torch (``pip install torch``).
"""

import sys

import torch

import profiler
from profiler import hierarchical_timer

STEPS = 20


def main(output_dir: str = "runs/torch_operators") -> None:
    torch.manual_seed(0)
    policy = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))
    optimizer = torch.optim.SGD(policy.parameters(), lr=1e-2)
    observations, returns = torch.randn(16, 8), torch.randn(16, 2)

    profiler.set_config(summaries_dir=output_dir, run_id="torch_operators", formats=["timers"],
                        profile_all=True)
    profiler.set_state("run")
    for _ in range(STEPS):
        with hierarchical_timer("update"):
            with hierarchical_timer("policy.forward"):
                loss = (policy(observations) - returns).pow(2).mean()
            with hierarchical_timer("policy.backward"):
                optimizer.zero_grad()
                loss.backward()
            with hierarchical_timer("optimizer.step"):
                optimizer.step()
    profiler.set_state("stop")
    profiler.dump()


if __name__ == "__main__":
    main(*sys.argv[1:2])
