"""What each consumer reads as a collective's size, and the one conversion from the plan's.

The plan holds a collective's whole buffer (plan.model.Collective.bytes): the all-reduce's tensor,
the reduce-scatter's input, the all-gather's output, the all-to-all's send buffer. The consumers
read it so, except ASTRA-sim's all-gather:

    consumer                                   ALLREDUCE  REDUCESCATTER  ALLGATHER       ALLTOALL
    ASTRA-sim 2.x (a Chakra trace's comm_size) whole      whole input    one rank's part whole
    ASTRA-sim 1.0 (a text layer's sizes)       whole      whole input    one rank's part whole
    SimAI (its text, default NcclFlowModel)    whole      whole input    whole output    whole

Sources. ASTRA-sim 2.x (astra-sim/astra-sim 518bd51, astra-sim/system/astraccl/native_collectives/
collective_algorithm/Ring.cc, Ring::Ring: `case ComType::All_Gather: final_data_size = data_size *
nodes_in_ring; msg_size = data_size;`, n - 1 steps; HalvingDoubling.cc alike; Workload.cc
issue_comm passes comm_size unchanged). ASTRA-sim 1.0 (branch ASTRA-sim-1.0, 07d5d19,
astra-sim/system/collective/Ring.cc, the same switch; workload/Layer.cc passes the column's size
unchanged). Measured on ASTRA-sim 2.x (analytical, one switch at 300 GB/s, ring): an ALL_GATHER of
comm_size S = 100 MiB takes (n - 1) S / B on n = 4, 8, 16 NPUs (976,606 / 2,278,734 / 4,882,990
ns), S / n takes (n - 1)/n S / B, the time of a ring moving the gathered S. SimAI (aliyun/SimAI
cef83f9): Sys.cc sets every collective to NcclFlowModel, whose all-gather flows are data_size /
nranks per step (MockNcclGroup.cc genAllGatherFlowModels): the size is the gathered output, as AICB
writes it. So the traces and ASTRA-sim text hold an all-gather's one-rank part: the gathered size
would make ASTRA-sim move n times the bytes (sequence parallelism, ZeRO, MODEL's forward).
"""

from __future__ import annotations

import enum

from modtrans.comm import CommType


class Consumer(enum.StrEnum):
    ASTRA_SIM = "astra-sim"  # 1.0's text, and 2.x: Chakra traces and Chakra's text converter
    SIMAI = "simai"


def written(comm: CommType, whole: int, ranks: int, reader: Consumer) -> int:
    """The size to write for a collective of `whole` bytes over `ranks` ranks."""
    if reader is Consumer.ASTRA_SIM and comm is CommType.ALLGATHER and ranks > 1:
        return -(-whole // ranks)
    return whole
