# Unit test of the training policy (exploration) in the simulated dungeon.
check_skill_functions(NetHackPlayer)
sims = run_trials(NetHackPlayer, trials=10, max_steps=150)
check_initiation(sims)
successes = 0
for sim in sims:
    skills = [entry["skill"] for entry in sim.history]
    branches = [entry["branch"] for entry in sim.history]
    went_down_and_up = "descender" in skills and "ascender" in skills
    deep_enough = sim.max_dungeon_depth >= 3
    back_from_mines = 2 in branches and 0 in branches[branches.index(2):]
    if went_down_and_up and deep_enough and back_from_mines and not sim.escaped:
        successes += 1
report("exploration", successes, len(sims), 7)
