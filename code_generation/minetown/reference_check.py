# Unit test of the minetown task: reach Minetown (Gnomish Mines, 3-4 levels below the entrance level).
check_skill_functions(NetHackPlayer)
reached = lambda sim: sim.branch == 2 and sim.depth == sim.minetown_depth
sims = run_trials(NetHackPlayer, trials=10, max_steps=200, stop=reached)
report("minetown", sum(1 for sim in sims if reached(sim)), len(sims), 8)
