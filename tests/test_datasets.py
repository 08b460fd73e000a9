"""Records of any dataset by name."""
import pytest

from icl_helpers import UsageError
from icl_helpers.data.datasets import dataset_records


def test_an_unknown_dataset_lists_them_all():
    with pytest.raises(UsageError, match=r"^Unknown dataset 'sentiment_numbr'; choose one of sentiment_number, animal_country, "
                                         r"sst2, trec, agnews, ethos\.$"):
        dataset_records("sentiment_numbr", 4)
