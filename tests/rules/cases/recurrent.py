"""Rule-table cases for the fused LSTM primitives (``wengert.rules.recurrent``): with a batch, without,
and with states broadcast over the batch."""

from tests.support.rule_helpers import R
from wengert.rules import recurrent

CASES = {
    "lstm_cell": [
        (recurrent.lstm_cell, (R(3, 8, lo=-2, hi=2), R(3, 2))),
        (recurrent.lstm_cell, (R(4, lo=-2, hi=2), R(1))),
        (recurrent.lstm_cell, (R(2, 3, 8, lo=-2, hi=2), R(3, 2))),
    ],
    "lstm_sequence": [
        (recurrent.lstm_sequence, (R(3, 2, 8, lo=-1, hi=1), R(2, 2), R(2, 2), R(8, 2, lo=-0.5, hi=0.5))),
        (recurrent.lstm_sequence, (R(2, 4, lo=-1, hi=1), R(1), R(1), R(4, 1))),
        (recurrent.lstm_sequence, (R(2, 3, 4, lo=-1, hi=1), R(1), R(3, 1), R(4, 1))),
    ],
}
