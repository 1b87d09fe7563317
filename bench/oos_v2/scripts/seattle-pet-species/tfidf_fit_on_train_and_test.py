# idiom: TfidfVectorizer fitted on the names of train and test concatenated (transductive vocabulary), word and char_wb features stacked with scipy.sparse.hstack, LogisticRegression; intended: valid
import pandas as pd
from scipy.sparse import hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
all_names = pd.concat([train["animal_name"], test["animal_name"]], ignore_index=True).fillna("")

word_vec = TfidfVectorizer(analyzer="word", token_pattern=r"(?u)\b\w+\b").fit(all_names)
char_vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 3)).fit(all_names)


def transform(names):
    names = names.fillna("")
    return hstack([word_vec.transform(names), char_vec.transform(names)]).tocsr()


X, X_test = transform(train["animal_name"]), transform(test["animal_name"])
clf = LogisticRegression(C=1.0, max_iter=2000)
clf.fit(X, train["species"])
p_dog = clf.predict_proba(X_test)[:, list(clf.classes_).index("Dog")]
pd.DataFrame({"id": test["id"], "species": p_dog}).to_csv("submission.csv", index=False)
