# Unit test of the training policy (exploration) in the simulated dungeon.
check_skill_functions(NetHackPlayer)
sims = run_trials(NetHackPlayer, trials=10, max_steps=150)
check_initiation(sims, way_first_near_entrance=True)
successes = 0
entered_mines = 0
for sim in sims:
    skills = [entry["skill"] for entry in sim.history]
    branches = [entry["branch"] for entry in sim.history]
    went_down_and_up = "descender" in skills and "ascender" in skills
    deep_enough = sim.max_dungeon_depth >= 2
    if 2 in branches:
        entered_mines += 1
    if went_down_and_up and deep_enough and not sim.escaped:
        successes += 1
# The training policy sends about half of the episodes into the Gnomish Mines.
if not 2 <= entered_mines <= 8:
    raise AssertionError("%d of %d episodes entered the Gnomish Mines; about half should" % (entered_mines, len(sims)))
report("exploration", successes, len(sims), 7)
