"""`python -m components.config`: regenerate stacks/stack.schema.json, the tables of docs/settings.md, the add-on
tables of docs/cloud.md and docs/architecture.md and the calibration table of docs/memory.md.

An entry script, not part of the package's import graph: it may read the presets and the calibration from
components.model.
"""

from components.config.docs import ADDON_DOCS, SCHEMA_PATH, SETTINGS_DOC, refresh_addon_doc, refresh_settings_doc, render_schema
from components.config.project import REPO_ROOT
from components.model.memory_calibration import MEMORY_DOC, refresh_memory_doc
from components.model.presets import render_presets_table

SCHEMA_PATH.write_text(render_schema())
SETTINGS_DOC.write_text(refresh_settings_doc(SETTINGS_DOC.read_text(), render_presets_table()))
for page in ADDON_DOCS:
    page.write_text(refresh_addon_doc(page.read_text()))
MEMORY_DOC.write_text(refresh_memory_doc(MEMORY_DOC.read_text()))
print(f"wrote {SCHEMA_PATH.relative_to(REPO_ROOT)}, the tables of {SETTINGS_DOC.relative_to(REPO_ROOT)}, "
      f"{', '.join(str(p.relative_to(REPO_ROOT)) for p in ADDON_DOCS)} and {MEMORY_DOC.relative_to(REPO_ROOT)}")
