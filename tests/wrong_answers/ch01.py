"""Chapter 1 submissions for the grader tests: plausible wrong answers, as exercise-cell code.

Each round holds at most one wrong answer per exercise and costs one grading run; every exercise
named in a round must lose exactly its own points.
"""


def _cell(body: str) -> str:
    return "def rnn_cell(x_t, h, w_ih, w_hh, b_ih, b_hh):\n" + body


def _layer(step: str, start: str = "x.new_zeros(x.shape[0], w_hh.shape[0]) if h0 is None else h0") -> str:
    return (
        "def rnn_layer(x, h0, w_ih, w_hh, b_ih, b_hh):\n"
        f"    h = {start}\n"
        "    h_start = h\n"
        "    outputs = []\n"
        "    for t in range(x.shape[1]):\n"
        f"{step}"
        "    return torch.stack(outputs, dim=1), outputs[-1]\n"
    )


def _jacobian(body: str) -> str:
    return "def rnn_step_jacobian(h_t, w_hh):\n" + body


def _gain(body: str) -> str:
    return "def balanced_gain(x, w_ih, rotation, b_ih, b_hh, u):\n" + body


_BISECTION_BACKWARDS = """    def ratio(gain):
        inputs = x.detach().clone().requires_grad_(True)
        _, h_T = rnn_layer(inputs, None, w_ih, gain * rotation, b_ih, b_hh)
        (h_T @ u).sum().backward()
        size = inputs.grad.norm(dim=-1).mean(dim=0)
        return (size[0] / size[-1]).item()

    low, high = 0.5, 4.0
    for _ in range(30):
        middle = (low + high) / 2
        if ratio(middle) < 1:
            high = middle
        else:
            low = middle
    return (low + high) / 2
"""

WRONG_ROUNDS = [
    {
        # a sigmoid where tanh belongs
        "1.1": _cell("    return torch.sigmoid(x_t @ w_ih.T + b_ih + h @ w_hh.T + b_hh)\n"),
        # the hidden state is not carried between steps: every step starts again from h0
        "1.2": _layer("        outputs.append(rnn_cell(x[:, t], h_start, w_ih, w_hh, b_ih, b_hh))\n"),
        # the tanh derivative is forgotten
        "1.3": _jacobian("    return w_hh.expand(h_t.shape[0], -1, -1).clone()\n"),
        # a rotation preserves lengths, so gain 1 (but tanh squashes at every step)
        "1.4": _gain("    return 1.0\n"),
    },
    {
        # the previous state does not enter the update
        "1.1": _cell("    return torch.tanh(x_t @ w_ih.T + b_ih + b_hh)\n"),
        # the initial state is ignored: always starts from zeros
        "1.2": _layer(
            "        h = rnn_cell(x[:, t], h, w_ih, w_hh, b_ih, b_hh)\n        outputs.append(h)\n",
            start="x.new_zeros(x.shape[0], w_hh.shape[0])",
        ),
        # 1 - h^2 scales the columns instead of the rows
        "1.3": _jacobian("    return (1 - h_t**2).unsqueeze(-2) * w_hh\n"),
        # the right measurement, the bisection moving the wrong way: it runs to the end of the interval
        "1.4": _gain(_BISECTION_BACKWARDS),
    },
    {
        # only one of the two biases
        "1.1": _cell("    return torch.tanh(x_t @ w_ih.T + b_ih + h @ w_hh.T)\n"),
        # outputs shifted by one: the state before each step is recorded, not after
        "1.2": _layer("        outputs.append(h)\n        h = rnn_cell(x[:, t], h, w_ih, w_hh, b_ih, b_hh)\n"),
        # tanh applied to h_t again
        "1.3": _jacobian("    return (1 - torch.tanh(h_t) ** 2).unsqueeze(-1) * w_hh\n"),
        # the gain that worked for the chapter's example, not measured for each case
        "1.4": _gain("    return 1.5\n"),
    },
]
