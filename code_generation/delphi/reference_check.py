# Unit test of the delphi task: reach the Oracle level (Dungeons of Doom, depth 5 to 9).
check_skill_functions(NetHackPlayer)
reached = lambda sim: sim.branch == 0 and sim.depth == sim.oracle_depth
sims = run_trials(NetHackPlayer, trials=10, max_steps=150, stop=reached)
report("delphi", sum(1 for sim in sims if reached(sim)), len(sims), 9)
