"""fixture_cases.py — the two text files of every training-fixture directory, which
tests/test_train_equiv.c reads: cases.txt (one case a line: its model, sparse spec,
optimizer, tolerance and the .pkw of PyTorch's trained weights) and losses.txt (PyTorch's
loss at each step). Shared by gen_train_fixtures.py and gen_model_fixtures.py.

  cases = Cases(steps=5)                       # "the mean loss of each of the 5 steps"
  cases.add("mlp_full_sgd", "mlp.json", "mlp_full.json", SGD, 1e-9, "mlp_full_sgd.pkw", losses)
  cases.write(out_dir)
"""
import os


class Cases:
    def __init__(self, steps, loss_note="the mean loss"):
        self.lines = ["# case model spec optimizer lr momentum weight_decay tolerance after"]
        self.loss_lines = ["# case: %s of each of the %d steps (before its update)"
                           % (loss_note, steps)]

    def add(self, case, model, spec, opt, tol, after, losses):
        """opt: {"kind", "lr", "momentum", "weight_decay"}; losses: one per step."""
        self.lines.append("%s %s %s %s %.17g %.17g %.17g %g %s" % (
            case, model, spec, opt["kind"], opt["lr"], opt["momentum"], opt["weight_decay"],
            tol, after))
        self.loss_lines.append(case + " " + " ".join("%.17g" % v for v in losses))

    def __len__(self):
        return len(self.lines) - 1

    def write(self, out_dir):
        for name, lines in (("cases.txt", self.lines), ("losses.txt", self.loss_lines)):
            with open(os.path.join(out_dir, name), "w") as f:
                f.write("\n".join(lines) + "\n")
