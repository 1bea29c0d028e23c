"""Entry points: each parses its flags, calls one library function, prints or saves.

Importing this package reads ``--skills`` first (:func:`common.skill_files.activate_from_argv`), before any module
reads the skill set: a bad skill file is refused here, with one line naming the file and the field, and exit 2.
"""
from common.skill_files import activate_from_argv

activate_from_argv()
