# Unit test of the gnomish task: reach the Gnomish Mines (branch 2).
check_skill_functions(NetHackPlayer)
sims = run_trials(NetHackPlayer, trials=10, max_steps=150, stop=lambda sim: sim.branch == 2)
report("gnomish", sum(1 for sim in sims if sim.branch == 2), len(sims), 9)
