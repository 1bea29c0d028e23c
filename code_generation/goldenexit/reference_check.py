# Unit test of the goldenexit task: visit levels 1-3, hold 20 gold, defeat 25 monsters,
# then leave the dungeon (ascend from level 1). Leaving earlier is a failure.
check_skill_functions(NetHackPlayer)
sims = run_trials(NetHackPlayer, trials=10, max_steps=300)
successes = 0
for sim in sims:
    if sim.escaped and sim.gold >= 20 and sim.kills >= 25 and sim.max_dungeon_depth >= 3:
        successes += 1
report("goldenexit", successes, len(sims), 8)
