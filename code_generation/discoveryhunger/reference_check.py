# Unit test of the discoveryhunger task: reach the Gnomish Mines, eat there after getting
# hungry, then reach the Oracle level (Dungeons of Doom, depth 5 to 9).
check_skill_functions(NetHackPlayer)
done = lambda sim: sim.ate_in_mines and sim.branch == 0 and sim.depth == sim.oracle_depth
sims = run_trials(NetHackPlayer, trials=10, max_steps=300, stop=done)
report("discoveryhunger", sum(1 for sim in sims if done(sim)), len(sims), 8)
