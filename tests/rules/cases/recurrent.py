"""Rule-table cases for the fused LSTM cell (``wengert.rules.recurrent``), with a batch, without,
and with a cell state broadcast over the batch."""

from tests.support.rule_helpers import R
from wengert.rules import recurrent

CASES = {
    "lstm_cell": [
        (recurrent.lstm_cell, (R(3, 8, lo=-2, hi=2), R(3, 2))),
        (recurrent.lstm_cell, (R(4, lo=-2, hi=2), R(1))),
        (recurrent.lstm_cell, (R(2, 3, 8, lo=-2, hi=2), R(3, 2))),
    ],
}
