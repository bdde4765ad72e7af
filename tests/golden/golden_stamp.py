"""OUT_DIR/stamp for the golden scripts that write a folder of references: what the files depend
on (the generator's bytes, the torch and transformers versions), written last, so a folder
whose stamp matches is complete and is not made again.

    stamp = Stamp(out_dir, __file__)
    if stamp.current():
        return
    ... write the references ...
    stamp.write()
"""
import hashlib
from pathlib import Path

import torch
import transformers


class Stamp:
    def __init__(self, out_dir, script):
        self.out_dir = Path(out_dir)
        self.file = self.out_dir / "stamp"
        digest = hashlib.sha256(Path(script).read_bytes()).hexdigest()
        self.text = f"{digest} torch {torch.__version__} transformers {transformers.__version__}\n"

    def current(self):
        """True (and says so) when the folder is complete for this generator; else clears the
        stamp and makes the folder, for the references to be written again."""
        if self.file.exists() and self.file.read_text() == self.text:
            print(f"{self.out_dir}: up to date")
            return True
        self.file.unlink(missing_ok=True)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        return False

    def write(self):
        self.file.write_text(self.text)
