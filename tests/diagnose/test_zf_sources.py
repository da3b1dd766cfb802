"""What the blind set zf (tests/corpus/diagnose/heldout-zf.md) showed was misread, written from its sources' own code,
not from the set's cases (the logs below are built from it):

- vLLM's StatelessProcessGroup.create (vllm/distributed/utils.py) builds its own TCPStore (``store = TCPStore(host_name=
  host, port=port, world_size=world_size, is_master=launch_server, ...)``, its server in that group's rank 0: TRL's
  vLLM server, not the trainer's rank 0); c10d's client gives up with socket.cpp's "The client socket has timed out
  after %dms while trying to connect to (%s, %d)." Only a store torch's own rendezvous made (torch/distributed/
  rendezvous.py _create_c10d_store, env://: rank 0 hosts it) names rank 0.
"""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict

TIMED_OUT = (
    "torch.distributed.DistNetworkError: The client socket has timed out after 300000ms while trying to connect to "
    "(127.0.0.1, 51216).\n"
)


def frame(path: str, line: int, func: str, code: str) -> str:
    return f'  File "{path}", line {line}, in {func}\n    {code}\n'


def test_a_store_its_caller_built_names_no_rank_0(tmp_path: Path) -> None:
    site = "/opt/conda/lib/python3.10/site-packages"
    vllm = (
        "Traceback (most recent call last):\n"
        + frame("/work/train_grpo.py", 41, "<module>", "trainer = GRPOTrainer(")
        + frame(f"{site}/trl/extras/vllm_client.py", 348, "init_communicator", "pg = StatelessProcessGroup.create(")
        + frame(f"{site}/vllm/distributed/utils.py", 410, "create", "store = TCPStore(")
        + TIMED_OUT
    )
    got = verdict(tmp_path, vllm)
    assert (got.klass, got.ranks) == ("rendezvous_timeout", [])
    env = (
        "Traceback (most recent call last):\n"
        + frame("/work/train.py", 12, "<module>", 'dist.init_process_group("nccl")')
        + frame(f"{site}/torch/distributed/distributed_c10d.py", 1520, "init_process_group",
                "store, rank, world_size = next(rendezvous_iterator)")
        + frame(f"{site}/torch/distributed/rendezvous.py", 269, "_env_rendezvous_handler",
                "store = _create_c10d_store(master_addr, master_port, rank, world_size, timeout, use_libuv)")
        + frame(f"{site}/torch/distributed/rendezvous.py", 189, "_create_c10d_store", "return TCPStore(")
        + TIMED_OUT
    )  # fmt: skip
    assert verdict(tmp_path, env)[:2] == ("rendezvous_timeout", [0])
