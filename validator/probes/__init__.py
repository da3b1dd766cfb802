"""Node probes: what a node can do, measured on every node at once and judged against its peers
(`validator scan --probes`, docs/scan.md "Probes").

    compute.py  a fixed matrix multiply per device (torch on each GPU, torch on the CPU, or pure
                Python): seconds per multiply and the achieved rate (standard library only)
    memory.py   host memory bandwidth: large copies between two buffers, timed (standard library
                only); device memory and host->device copies where torch sees a GPU
    judge.py    median and MAD over the peers; a node is a suspect when it is worse by a factor
                and by an absolute gap
    rounds.py   every node at once, then each suspect again alone (with control nodes), twice,
                before it is named (PRB001, PRB002)
    codes.py    the PRB codes
    exclude.py  the named nodes taken out, in each launcher's form

compute.py and memory.py are sent to the nodes as a transport ``Program``, like the net check's
prober; importing this package imports nothing.
"""
