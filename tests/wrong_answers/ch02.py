"""Chapter 2 submissions for the grader tests: plausible wrong answers, as exercise-cell code.

Each round holds at most one wrong answer per exercise and costs one grading run; every exercise
named in a round must lose exactly its own points.
"""


def _gates(body: str) -> str:
    return "def lstm_gates(x_t, h, w_ih, w_hh, b_ih, b_hh):\n    z = x_t @ w_ih.T + b_ih + h @ w_hh.T + b_hh\n" + body


def _cell(update: str, show: str = "o * torch.tanh(c_new)", result: str = "h_new, c_new") -> str:
    return (
        "def lstm_cell(x_t, state, w_ih, w_hh, b_ih, b_hh):\n"
        "    h, c = state\n"
        "    i, f, g, o = lstm_gates(x_t, h, w_ih, w_hh, b_ih, b_hh)\n"
        f"    c_new = {update}\n"
        f"    h_new = {show}\n"
        f"    return {result}\n"
    )


def _layer(carry_h: bool = True, carry_c: bool = True, emit: str = "h") -> str:
    return (
        "def lstm_layer(x, state, w_ih, w_hh, b_ih, b_hh):\n"
        "    if state is None:\n"
        "        zeros = x.new_zeros(x.shape[0], w_hh.shape[1])\n"
        "        state = (zeros, zeros)\n"
        "    h0, c0 = state\n"
        "    h, c = h0, c0\n"
        "    outputs = []\n"
        "    for t in range(x.shape[1]):\n"
        f"        h, c = lstm_cell(x[:, t], ({'h' if carry_h else 'h0'}, {'c' if carry_c else 'c0'}), w_ih, w_hh, b_ih, b_hh)\n"
        f"        outputs.append({emit})\n"
        "    return torch.stack(outputs, dim=1), (h, c)\n"
    )


_INIT = """class LSTM(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers=1):
        super().__init__()
        self.num_layers = num_layers
        bound = 1 / math.sqrt(hidden_size)
        for k in range(num_layers):
            d_in = input_size if k == 0 else hidden_size
            for name, shape in ((f"weight_ih_l{k}", (4 * hidden_size, d_in)), (f"weight_hh_l{k}", (4 * hidden_size, hidden_size)),
                                (f"bias_ih_l{k}", (4 * hidden_size,)), (f"bias_hh_l{k}", (4 * hidden_size,))):
                weight = nn.Parameter(torch.empty(shape).uniform_(-bound, bound))
                self.register_parameter(name, weight)

    def layer_weights(self, k):
        return (self.get_parameter(f"weight_ih_l{k}"), self.get_parameter(f"weight_hh_l{k}"),
                self.get_parameter(f"bias_ih_l{k}"), self.get_parameter(f"bias_hh_l{k}"))

    def forward(self, x, state=None):
"""


def _stack(
    layer_input: str = "output",
    layer_state: str = "(state[0][k], state[1][k])",
    result: str = "(torch.stack(hs), torch.stack(cs))",
) -> str:
    return _INIT + (
        "        output, hs, cs = x, [], []\n"
        "        for k in range(self.num_layers):\n"
        f"            output, (h, c) = lstm_layer({layer_input}, None if state is None else {layer_state}, *self.layer_weights(k))\n"
        "            hs.append(h)\n"
        "            cs.append(c)\n"
        f"        return output, {result}\n"
    )


_GRU = """def gru_cell(x_t, h, w_ih, w_hh, b_ih, b_hh):
    x_r, x_z, x_n = (x_t @ w_ih.T + b_ih).chunk(3, dim=-1)
    h_r, h_z, h_n = (h @ w_hh.T + b_hh).chunk(3, dim=-1)
    r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
"""


def _forget_bias(measure: str, raised: str = "", returned: str = "product.mean().item()") -> str:
    """choose_forget_bias by bisection, with the lines that raise the forget gate and measure the memory."""
    return (
        "def choose_forget_bias(x, w_ih, w_hh, b_ih, b_hh, target):\n"
        "    B, T, _ = x.shape\n"
        "    H = w_hh.shape[1]\n"
        "\n"
        "    def kept(bias):\n"
        "        raised, raised_hh = b_ih.clone(), b_hh.clone()\n"
        "        raised[H:2 * H] += bias\n"
        f"{raised}"
        "        state = (x.new_zeros(B, H), x.new_zeros(B, H))\n"
        "        product, gates = x.new_ones(B, H), []\n"
        "        for t in range(T):\n"
        "            _, f, _, _ = lstm_gates(x[:, t], state[0], w_ih, w_hh, raised, raised_hh)\n"
        "            state = lstm_cell(x[:, t], state, w_ih, w_hh, raised, raised_hh)\n"
        f"{measure}"
        f"        return {returned}\n"
        "\n"
        "    low, high = -10.0, 30.0\n"
        "    for _ in range(30):\n"
        "        middle = (low + high) / 2\n"
        "        if kept(middle) < target:\n"
        "            low = middle\n"
        "        else:\n"
        "            high = middle\n"
        "    return (low + high) / 2\n"
    )


WRONG_ROUNDS = [
    {
        # forget gate and input gate swapped (blocks taken as f, i, g, o)
        "2.1": _gates(
            "    z_f, z_i, z_g, z_o = z.chunk(4, dim=-1)\n"
            "    return torch.sigmoid(z_i), torch.sigmoid(z_f), torch.tanh(z_g), torch.sigmoid(z_o)\n"
        ),
        # forget and input gates swapped in the update of the cell state
        "2.2": _cell("i * c + f * g"),
        # the cell state is not carried between steps
        "2.3": _layer(carry_c=False),
        # every layer reads x instead of the layer below
        "2.4": _stack(layer_input="x"),
        "2.6": _GRU + "    return z * torch.tanh(x_n + r * h_n) + (1 - z) * h\n",  # interpolation reversed
        # a near miss: the bisection raises the forget rows of both biases, so the grader's single raise is half
        "2.5": _forget_bias("            product = product * f\n", raised="        raised_hh[H:2 * H] += bias\n"),
    },
    {
        # tanh where sigmoid belongs
        "2.1": _gates("    return tuple(torch.tanh(z_k) for z_k in z.chunk(4, dim=-1))\n"),
        # h = o * c, the tanh forgotten
        "2.2": _cell("f * c + i * g", show="o * c_new"),
        # the hidden state is not carried between steps
        "2.3": _layer(carry_h=False),
        # every layer starts from layer 0's initial state
        "2.4": _stack(layer_state="(state[0][0], state[1][0])"),
        "2.6": _GRU + "    return (1 - z) * torch.tanh(x_n + h_n) + z * h\n",  # no reset gate
        # the formula for a gate that hears only its bias, sigmoid(b) ** T = target: the inputs ignored
        "2.5": (
            "def choose_forget_bias(x, w_ih, w_hh, b_ih, b_hh, target):\n"
            "    f = target ** (1 / x.shape[1])\n"
            "    return math.log(f / (1 - f))\n"
        ),
    },
    {
        # the blocks read in the order i, f, o, g
        "2.1": _gates(
            "    z_i, z_f, z_o, z_g = z.chunk(4, dim=-1)\n"
            "    return torch.sigmoid(z_i), torch.sigmoid(z_f), torch.tanh(z_g), torch.sigmoid(z_o)\n"
        ),
        # the new hidden state shows the old cell state
        "2.2": _cell("f * c + i * g", show="o * torch.tanh(c)"),
        # the outputs are the cell states, not the hidden states
        "2.3": _layer(emit="c"),
        # h_n and c_n swapped
        "2.4": _stack(result="(torch.stack(cs), torch.stack(hs))"),
        # the reset gate applied to h before the product, as in Cho et al.'s paper (not PyTorch's form)
        "2.6": (
            "def gru_cell(x_t, h, w_ih, w_hh, b_ih, b_hh):\n"
            "    x_r, x_z, x_n = (x_t @ w_ih.T + b_ih).chunk(3, dim=-1)\n"
            "    w_hr, w_hz, w_hn = w_hh.chunk(3, dim=0)\n"
            "    b_hr, b_hz, b_hn = b_hh.chunk(3)\n"
            "    r = torch.sigmoid(x_r + h @ w_hr.T + b_hr)\n"
            "    z = torch.sigmoid(x_z + h @ w_hz.T + b_hz)\n"
            "    n = torch.tanh(x_n + (r * h) @ w_hn.T + b_hn)\n"
            "    return (1 - z) * n + z * h\n"
        ),
        # the mean forget gate to the power T: the average of a product is not the product of the averages
        "2.5": _forget_bias("            gates.append(f)\n", returned="torch.stack(gates).mean().item() ** T"),
    },
]
