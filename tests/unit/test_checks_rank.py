"""RNK: the rank layout, from factory facts. Each code fires naming the culprit and stays silent
in the close case that is fine."""

from __future__ import annotations

from tests.factories import check, fires, node_job, only, rank_job, tweak


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
    job = tweak(node_job(2), 1, launch={"nnodes": 3, "world_size": 24})
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
    job = tweak(node_job(3), 2, launch={"nnodes": 2, "world_size": 16})
    f = only(check(job, "RNK009"))
    assert f.hosts == ["node003"]
    assert (f.expected, f.actual) == ("3", "2")


@fires("RNK009")
def test_nnodes_tie_goes_to_node_rank_zero() -> None:
    # the silent failure of ../shared/logs/torch-nnodes_mismatch.log: --nnodes=2 vs --nnodes=3
    job = tweak(node_job(2), 1, launch={"nnodes": 3, "world_size": 24})
    for order in (job, list(reversed(job))):
        f = only(check(order, "RNK009"))
        assert f.hosts == ["node002"]
        assert "--nnodes=3" in f.message


def test_node_ranks_may_differ_across_nodes() -> None:
    assert check(node_job(4), "RNK009") == []
