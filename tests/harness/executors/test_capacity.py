"""The resource arithmetic checked before any Ray actor starts (no Ray needed)."""

from harness.executors.capacity import PoolNeed, shortfall

CPU1 = {"CPU": 1.0, "GPU": 0.0}


def test_one_shared_pool_fits_where_a_pool_per_member_did_not():
    # the default bylang judge on a 2-CPU machine with --workers 2: one pool of both encoders fits,
    # a pool per route would need twice the CPUs
    assert shortfall([PoolNeed(2, CPU1)], [], {"CPU": 2.0}) is None
    msg = shortfall([PoolNeed(2, CPU1), PoolNeed(2, CPU1)], [], {"CPU": 2.0})
    assert msg == (
        "the Ray workers need 2 pools × 2 workers × 1 CPU = 4 CPUs, but the Ray cluster has 2 CPUs: "
        "lower --workers to 1, or num_cpus= in the judge spec, or add nodes (ray start --address …)"
    )


def test_mixed_shapes_held_pools_and_gpus_are_spelled_out():
    msg = shortfall([PoolNeed(3, CPU1)], [], {"CPU": 2.0})
    assert (
        msg is not None
        and "need 1 pool × 3 workers × 1 CPU = 3 CPUs" in msg
        and "lower --workers to 2" in msg
    )
    msg = shortfall([PoolNeed(2, {"CPU": 0.5}), PoolNeed(2, {"CPU": 1.5})], [], {"CPU": 2.0})
    assert msg is not None and "need 2 workers × 0.5 CPUs + 2 workers × 1.5 CPUs = 4 CPUs" in msg
    # pools this command already runs hold their share
    msg = shortfall([PoolNeed(2, CPU1)], [PoolNeed(2, {"CPU": 0.5})], {"CPU": 2.0})
    assert msg is not None and "= 2 CPUs (+ 1 held by this command's other pools)" in msg and "to 1," in msg
    assert shortfall([PoolNeed(2, CPU1)], [PoolNeed(2, {"CPU": 0.0})], {"CPU": 2.0}) is None
    # GPUs: no --workers fits a 4-GPU engine on a 2-GPU cluster, so the flag to lower is the GPUs'
    msg = shortfall([PoolNeed(1, {"CPU": 1.0, "GPU": 4.0})], [], {"CPU": 16.0, "GPU": 2.0})
    assert msg is not None and msg.startswith(
        "the Ray workers need 1 pool × 1 worker × 4 GPUs = 4 GPUs, but the Ray "
        "cluster has 2 GPUs: lower --gpus-per-worker"
    )
    assert shortfall([PoolNeed(2, {"CPU": 1.0, "GPU": 1.0})], [], {"CPU": 2.0}) is not None  # no GPU at all
