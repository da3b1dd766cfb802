"""RNK: the rank layout, from factory facts. Each code fires naming the culprit and stays silent
in the close case that is fine."""

from __future__ import annotations

from tests.factories import check, fires, node_job, only, rank_job, tweak
from validator.agent.probe import filtered_env
from validator.facts.command import parse_command
from validator.facts.launch import parse_launch
from validator.model import Facts


def relaunch(job: list[Facts], i: int, *options: str, env: dict[str, str] | None = None) -> list[Facts]:
    """Node ``i`` launched with its command plus ``options`` (the last spelling of an option wins,
    as in argparse), its facts made by the real parsers from that command line and ``env``."""
    argv = job[i]["launch"]["command"]["argv"]  # type: ignore[index]
    argv = [*argv[:-1], *options, argv[-1]]
    env = env or {}
    return tweak(job, i, env=env, launch=parse_launch(filtered_env(env), parse_command(argv)))


def launched(*argvs: list[str]) -> list[Facts]:
    """One node a command line: node_job's nodes, each launched with its own ``argv``."""
    job = node_job(len(argvs))
    for i, argv in enumerate(argvs):
        job = tweak(job, i, launch=parse_launch({}, parse_command(argv)))
    return job


@fires("RNK001")
def test_duplicate_rank_names_the_rank_and_both_processes() -> None:
    job = tweak(rank_job(1, 4), 3, launch={"rank": 1, "local_rank": 3})
    f = only(check(job, "RNK001"))
    assert f.ranks == [1]
    assert f.hosts == ["node001"]
    assert "10001" in f.message and "10003" in f.message  # both pids


def test_wrapper_agents_have_no_rank_to_duplicate() -> None:
    assert check(node_job(4), "RNK001") == []


@fires("RNK002")
def test_missing_ranks_are_named_with_the_host_they_belong_on() -> None:
    job = [tweak([f], 0, launch={"nodelist": "node[001-003]"})[0] for f in rank_job(3, 4)]
    job = job[:4] + job[8:]  # node002 never started
    f = only(check(job, "RNK002"))
    assert f.ranks == [4, 5, 6, 7]
    assert f.hosts == ["node002"]
    assert "4-7" in f.message


def test_no_missing_ranks_in_a_complete_job() -> None:
    assert check(rank_job(3, 4), "RNK002") == []


@fires("RNK003")
def test_rank_at_world_size_is_outside_the_world() -> None:
    job = tweak(rank_job(1, 4), 3, launch={"rank": 4})
    f = only(check(job, "RNK003"))
    assert f.ranks == [4]
    assert f.actual == "4"


def test_last_rank_is_inside_the_world() -> None:
    assert check(rank_job(1, 4), "RNK003") == []


@fires("RNK004")
def test_world_size_outlier_is_the_rank_that_differs_from_the_majority() -> None:
    job = tweak(rank_job(2, 4), 6, launch={"world_size": 9})
    f = only(check(job, "RNK004"))
    assert f.ranks == [6]
    assert (f.expected, f.actual) == ("8", "9")


def test_world_size_tie_goes_to_rank_zero_whatever_the_input_order() -> None:
    job = tweak(rank_job(1, 2), 1, launch={"world_size": 3})
    assert only(check(job, "RNK004")).ranks == [1]
    assert only(check(list(reversed(job)), "RNK004")).ranks == [1]


def test_derived_world_sizes_of_wrapper_agents_are_left_to_rnk009() -> None:
    job = relaunch(node_job(2), 1, "--nnodes=3")
    assert job[1]["launch"]["world_size"] == 24
    assert check(job, "RNK004") == []
    assert check(job, "RNK009")


@fires("RNK005")
def test_duplicate_local_rank_on_a_node() -> None:
    job = tweak(rank_job(2, 4), 5, launch={"local_rank": 0})
    f = only(check(job, "RNK005"))
    assert f.ranks == [4, 5]
    assert f.hosts == ["node002"]


@fires("RNK005")
def test_local_rank_beyond_local_world_size() -> None:
    job = tweak(rank_job(1, 4), 3, launch={"local_rank": 4})
    f = only(check(job, "RNK005"))
    assert f.ranks == [3]
    assert "LOCAL_WORLD_SIZE=4" in f.message


def test_virtual_local_ranks_with_one_gpu_each_are_fine() -> None:
    job = rank_job(1, 4)
    for i in range(4):
        job = tweak(job, i, launch={"local_rank": 0}, gpus={"visible": [job[i]["gpus"]["devices"][i]["uuid"]]})
    assert check(job, "RNK005") == []


@fires("RNK006")
def test_two_agents_with_the_default_node_rank() -> None:
    job = node_job(3)
    job = tweak(job, 2, launch={"node_rank": 0, "sources": {"node_rank": "torchrun default --node-rank"}})
    f = only(check(job, "RNK006"))
    assert f.hosts == ["node001", "node003"]
    assert "default --node-rank is 0" in f.message


def test_c10d_agents_have_no_node_rank_to_duplicate() -> None:
    job = node_job(3, backend="c10d")
    job = [tweak([f], 0, launch={"node_rank": None})[0] for f in job]
    assert check(job, "RNK006") == []


def test_ranks_of_one_node_share_its_node_rank() -> None:
    assert check(rank_job(2, 8), "RNK006") == []


@fires("RNK007")
def test_missing_node_is_named_from_the_nodelist() -> None:
    job = [tweak([f], 0, launch={"nodelist": "node[001-003]"})[0] for f in node_job(3)]
    f = only(check(job[:2], "RNK007"))
    assert f.hosts == ["node003"]
    assert "node rank 2" in f.message


def test_all_nodes_present() -> None:
    assert check(node_job(3), "RNK007") == []


@fires("RNK008")
def test_world_size_that_is_not_nodes_times_ranks_per_node() -> None:
    job = [tweak([f], 0, launch={"world_size": 12})[0] for f in rank_job(2, 4)]
    f = only(check(job, "RNK008"))
    assert (f.expected, f.actual) == ("8", "12")
    assert f.ranks == list(range(8))


def test_heterogeneous_slurm_nodes_are_not_held_to_the_product() -> None:
    # the real srun layout of the harness: 3 tasks on n1, 1 on n2 (SLURM_TASKS_PER_NODE=3,1)
    job = rank_job(2, 2)
    job = [
        tweak([f], 0, launch={"world_size": 4, "local_world_size": 3 if f["launch"]["node_rank"] == 0 else 1})[0]
        for f in job
    ]
    assert check(job, "RNK008") == []


@fires("RNK009")
def test_nnodes_outlier_names_the_node_not_the_master() -> None:
    job = relaunch(node_job(3), 2, "--nnodes=2")
    f = only(check(job, "RNK009"))
    assert f.hosts == ["node003"]
    assert (f.expected, f.actual) == ("3", "2")


@fires("RNK009")
def test_nnodes_tie_goes_to_node_rank_zero() -> None:
    # the silent failure of ../shared/logs/torch-nnodes_mismatch.log: --nnodes=2 vs --nnodes=3
    job = relaunch(node_job(2), 1, "--nnodes=3")
    for order in (job, list(reversed(job))):
        f = only(check(order, "RNK009"))
        assert f.hosts == ["node002"]
        assert "--nnodes=3" in f.message


def test_node_ranks_may_differ_across_nodes() -> None:
    assert check(node_job(4), "RNK009") == []


@fires("RNK009")
def test_an_option_outside_the_old_hand_list_names_its_node_and_node_rank() -> None:
    job = relaunch(node_job(3), 1, "--max-restarts=3")
    f = only(check(job, "RNK009"))
    assert f.hosts == ["node002"] and "node rank 1 on node002" in f.message
    assert "--max-restarts=3" in f.message
    assert (f.expected, f.actual) == ("0 (the default)", "3")


@fires("RNK009")
def test_a_flag_given_on_one_node_only() -> None:
    f = only(check(relaunch(node_job(3), 2, "--standalone"), "RNK009"))
    # --standalone makes a c10d node: its node rank is assigned at rendezvous, so it is named by host
    assert (
        f.hosts == ["node003"] and f.message == "--standalone set on participant on node003; not set on the other nodes"
    )
    assert f.fix == "give --standalone on every node or on none"


def test_an_option_omitted_on_one_node_is_the_default_there() -> None:
    job = relaunch(node_job(3), 0, "--max-restarts=0", "--rdzv-backend=static", "--rdzv-id=none", "--nnodes=3:3")
    job = relaunch(job, 2, "--max_restarts", "00", "--nproc_per_node=8")
    assert check(job, "RNK009") == []


def test_per_node_and_free_options_may_differ() -> None:
    job = relaunch(node_job(3), 1, "--local-addr=10.0.0.2", "--rdzv-conf=is_host=0", "--log-dir=/tmp/n1",
                   "--monitor-interval=5", "--start-method=fork", "--tee=3")  # fmt: skip
    assert check(job, "RNK009") == []


@fires("RNK009")
def test_a_pet_variable_stands_for_an_omitted_option() -> None:
    job = relaunch(node_job(2), 1, env={"PET_MAX_RESTARTS": "2"})
    f = only(check(job, "RNK009"))
    assert f.hosts == ["node002"] and (f.expected, f.actual) == ("0 (the default)", "2 (PET_MAX_RESTARTS)")
    assert check(relaunch(node_job(2), 1, env={"PET_MAX_RESTARTS": "0"}), "RNK009") == []


def test_values_known_only_at_start_are_not_compared() -> None:
    # --nproc-per-node=gpu is the node's GPU count, decided when torchrun starts
    assert check(relaunch(node_job(2), 1, "--nproc-per-node=gpu"), "RNK009") == []


def ds(node_rank: int, *options: str) -> list[str]:
    return ["deepspeed", "--no_ssh", f"--node_rank={node_rank}", "--master_addr=node001", *options, "train.py"]


@fires("RNK009")
def test_deepspeed_options_and_defaults() -> None:
    f = only(check(launched(ds(0), ds(1), ds(2, "--launcher=openmpi")), "RNK009"))
    assert f.hosts == ["node003"] and "--launcher=openmpi" in f.message and f.expected == "pdsh (the default)"
    assert check(launched(ds(0, "--launcher=pdsh"), ds(1), ds(2)), "RNK009") == []
    # --num_nodes omitted: every host of the hostfile, known only when deepspeed reads it
    assert check(launched(ds(0, "--num_nodes=3"), ds(1, "--num_nodes=3"), ds(2)), "RNK009") == []
    f = only(check(launched(ds(0, "--num_nodes=3"), ds(1, "--num_nodes=3"), ds(2, "--num_nodes=2")), "RNK009"))
    assert f.hosts == ["node003"] and "--num_nodes=2" in f.message


def acc(rank: int, *options: str) -> list[str]:
    return ["accelerate", "launch", "--num_machines=3", f"--machine_rank={rank}", "--main_process_ip=node001",
            *options, "train.py"]  # fmt: skip


@fires("RNK009")
def test_accelerate_distribution_settings_must_agree() -> None:
    job = launched(acc(0, "--zero_stage=3"), acc(1, "--zero_stage=3"), acc(2, "--zero-stage", "2"))
    f = only(check(job, "RNK009"))
    assert f.hosts == ["node003"] and "--zero_stage=2" in f.message and f.expected == "3"
    # omitted where accelerate's config file may set it: not compared; a per-node path may differ
    job = launched(acc(0, "--use_fsdp"), acc(1), acc(2, "--use_fsdp", "--config_file=/etc/n2.yaml"))
    assert check(job, "RNK009") == []
    f = only(check(launched(acc(0), acc(1), acc(2, "--max_restarts=1")), "RNK009"))
    assert f.hosts == ["node003"] and f.expected == "0 (the default)"
