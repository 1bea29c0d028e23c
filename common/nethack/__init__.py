"""NetHack facts the phases share: bottom-line stats (:mod:`.blstats`), the action set and
macro keys (:mod:`.actions`, needs NLE), glyph tables (:mod:`.glyphs`, needs NLE), message
decoding (:mod:`.messages`) and shop prices (:mod:`.prices`)."""
